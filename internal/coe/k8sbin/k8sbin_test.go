package k8sbin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/layout"
)

// fakeTools makes a tools directory whose binaries are shell scripts that
// print what the real ones print for --version.
func fakeTools(t *testing.T, versions map[Name]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, out := range versions {
		script := "#!/bin/sh\nprintf '%s\\n' '" + out + "'\n"
		if err := os.WriteFile(filepath.Join(dir, string(n)), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, StagesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range KwokStages {
		if err := os.WriteFile(filepath.Join(dir, StagesDir, s), []byte("kind: Stage\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func pinnedOutputs() map[Name]string {
	return map[Name]string{
		APIServer:         "Kubernetes v1.37.2",
		ControllerManager: "Kubernetes v1.37.2",
		Scheduler:         "Kubernetes v1.37.2",
		Kubelet:           "Kubernetes v1.37.2",
		Kwok:              "kwok version v0.8.0 go1.26.8 (linux/amd64)",
		Etcd:              "etcd Version: 3.6.16",
	}
}

func TestDirPrecedence(t *testing.T) {
	t.Setenv(EnvToolsDir, "")
	if got := Dir(""); got != layout.DefaultK8sToolsDir {
		t.Errorf("Dir() with nothing set = %q, want %q", got, layout.DefaultK8sToolsDir)
	}
	t.Setenv(EnvToolsDir, "/from/env")
	if got := Dir(""); got != "/from/env" {
		t.Errorf("Dir() with the environment set = %q", got)
	}
	if got := Dir("/from/flag"); got != "/from/flag" {
		t.Errorf("Dir(flag) = %q, the flag must win over the environment", got)
	}
}

func TestLocateFindsEveryBinaryAndStage(t *testing.T) {
	dir := fakeTools(t, pinnedOutputs())
	tools, err := Locate(dir, All...)
	if err != nil {
		t.Fatalf("Locate: %v", err)
	}
	if got := tools.Path(APIServer); got != filepath.Join(dir, "kube-apiserver") {
		t.Errorf("Path(APIServer) = %q", got)
	}
	if got := tools.KwokStageConfigs(); len(got) != 5 || got[0] != filepath.Join(dir, "stages", "node-initialize.yaml") {
		t.Errorf("KwokStageConfigs = %q", got)
	}
	if err := tools.CheckVersions(context.Background(), All...); err != nil {
		t.Errorf("CheckVersions of pinned versions: %v", err)
	}
}

func TestLocateNamesTheMakeTargetForAMissingBinary(t *testing.T) {
	out := pinnedOutputs()
	delete(out, ControllerManager)
	dir := fakeTools(t, out)
	os.Remove(filepath.Join(dir, StagesDir, "pod-ready.yaml"))
	_, err := Locate(dir)
	if err == nil {
		t.Fatal("Locate succeeded without kube-controller-manager")
	}
	if ecode.ClassOf(err) != ecode.Environ {
		t.Errorf("class = %v, want %v", ecode.ClassOf(err), ecode.Environ)
	}
	for _, want := range []string{"kube-controller-manager", "stages/pod-ready.yaml", "make k8s-tools", EnvToolsDir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// Only what is needed is checked: the scheduler alone is there.
	if _, err := Locate(dir, Scheduler); err != nil {
		t.Errorf("Locate(scheduler): %v", err)
	}
}

func TestLocateRefusesANonExecutableFile(t *testing.T) {
	dir := fakeTools(t, pinnedOutputs())
	if err := os.Chmod(filepath.Join(dir, "etcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Locate(dir, Etcd); err == nil || !strings.Contains(err.Error(), "etcd missing") {
		t.Errorf("Locate with a non-executable etcd: %v", err)
	}
}

func TestCheckVersionsNamesAMismatch(t *testing.T) {
	out := pinnedOutputs()
	out[APIServer] = "Kubernetes v1.36.0"
	out[Etcd] = "etcd Version: 3.4.23\nGit SHA: Not provided\nGo Version: go1.19\n"
	tools, err := Locate(fakeTools(t, out), All...)
	if err != nil {
		t.Fatal(err)
	}
	err = tools.CheckVersions(context.Background(), All...)
	if err == nil {
		t.Fatal("CheckVersions accepted v1.36.0 and etcd 3.4.23")
	}
	for _, want := range []string{"is v1.36.0, Corral runs v1.37.2", "is v3.4.23, Corral runs v3.6.16", MakeTarget} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "kube-scheduler") {
		t.Errorf("error names the scheduler, whose version is right: %v", err)
	}
}

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		n    Name
		out  string
		want string
		ok   bool
	}{
		{APIServer, "Kubernetes v1.37.2\n", "v1.37.2", true},
		{Kwok, "kwok version v0.8.0 go1.26.8 (linux/amd64)\n", "v0.8.0", true},
		{Etcd, "etcd Version: 3.6.16\nGit SHA: Not provided (use ./build instead of go build)\n", "v3.6.16", true},
		{APIServer, "Kubernetes v0.0.0-master+$Format:%H$\n", "v0.0.0-master+$Format:%H$", true},
		{APIServer, "unknown flag: --version\n", "", false},
		{Etcd, "Kubernetes v1.37.2\n", "", false},
	} {
		got, ok := parseVersion(c.n, []byte(c.out))
		if got != c.want || ok != c.ok {
			t.Errorf("parseVersion(%s, %q) = %q, %v; want %q, %v", c.n, c.out, got, ok, c.want, c.ok)
		}
	}
}

// TestBuiltToolsArePinned checks the directory `make k8s-tools` built,
// when there is one.
func TestBuiltToolsArePinned(t *testing.T) {
	tools, err := Locate(Dir(""), All...)
	if err != nil {
		if os.Getenv("CORRAL_REQUIRE_K8S") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no built tools: %v", err)
	}
	if err := tools.CheckVersions(context.Background(), All...); err != nil {
		t.Fatal(err)
	}
}
