// Package k8sbin finds the pinned Kubernetes binaries COE clusters run:
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kwok
// (with its stage configs) and etcd. `make k8s-tools` builds them from the
// Go module proxy into one directory (tools/k8s); nothing is downloaded at
// run time. The directory is, in order: an explicit flag value, the
// CORRAL_K8S_TOOLS environment variable, layout.DefaultK8sToolsDir.
//
// A binary that is missing is an ecode.Environ error that names the make
// target, so an operator knows what to run rather than what went wrong.
package k8sbin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/layout"
)

// EnvToolsDir overrides layout.DefaultK8sToolsDir.
const EnvToolsDir = "CORRAL_K8S_TOOLS"

// MakeTarget builds the binaries; errors name it.
const MakeTarget = "make k8s-tools"

// The pinned versions tools/k8s builds.
const (
	KubernetesVersion = "v1.37.2"
	KwokVersion       = "v0.8.0"
	EtcdVersion       = "v3.6.16"
)

// Name is one binary of the tools directory.
type Name string

const (
	APIServer         Name = "kube-apiserver"
	ControllerManager Name = "kube-controller-manager"
	Scheduler         Name = "kube-scheduler"
	Kubelet           Name = "kubelet"
	Kwok              Name = "kwok"
	Etcd              Name = "etcd"
)

// ControlPlane is what a COE cluster's control plane with kwok nodes runs.
var ControlPlane = []Name{Etcd, APIServer, ControllerManager, Scheduler, Kwok}

// All is every binary `make k8s-tools` builds.
var All = []Name{Etcd, APIServer, ControllerManager, Scheduler, Kubelet, Kwok}

// StagesDir is the subdirectory of the tools directory that holds kwok's
// stage configs.
const StagesDir = "stages"

// KwokStages are kwok's stage configs a cluster's kwok loads: nodes become
// Ready and keep a lease, pods become Ready, complete and are deleted.
// Without stages kwok refuses to start.
var KwokStages = []string{
	"node-initialize.yaml",
	"node-heartbeat-with-lease.yaml",
	"pod-ready.yaml",
	"pod-complete.yaml",
	"pod-delete.yaml",
}

// Dir is the tools directory: flagValue when set, else $CORRAL_K8S_TOOLS,
// else layout.DefaultK8sToolsDir.
func Dir(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if d := os.Getenv(EnvToolsDir); d != "" {
		return d
	}
	return layout.DefaultK8sToolsDir
}

// Tools is a tools directory whose binaries were found.
type Tools struct {
	dir string
}

// Locate checks that dir holds the binaries named in need (ControlPlane
// when none are named) as executable files, and kwok's stage configs when
// kwok is needed.
func Locate(dir string, need ...Name) (Tools, error) {
	if len(need) == 0 {
		need = ControlPlane
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Tools{}, ecode.Errorf(ecode.Environ, "k8sbin: tools directory %q: %w", dir, err)
	}
	t := Tools{dir: abs}
	var missing []string
	for _, n := range need {
		if err := checkExecutable(t.Path(n)); err != nil {
			missing = append(missing, string(n))
			continue
		}
		if n == Kwok {
			for _, s := range t.KwokStageConfigs() {
				if fi, err := os.Stat(s); err != nil || !fi.Mode().IsRegular() {
					missing = append(missing, filepath.Join(StagesDir, filepath.Base(s)))
				}
			}
		}
	}
	if len(missing) > 0 {
		return Tools{}, ecode.Errorf(ecode.Environ,
			"k8sbin: %s missing from %s: build them with `%s` (K8S_TOOLS_DIR=%s), or set %s to a directory that holds them",
			strings.Join(missing, ", "), abs, MakeTarget, abs, EnvToolsDir)
	}
	return t, nil
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file: %w", path, fs.ErrPermission)
	}
	return nil
}

// Dir is the tools directory (absolute).
func (t Tools) Dir() string { return t.dir }

// Path is the binary's file.
func (t Tools) Path(n Name) string { return filepath.Join(t.dir, string(n)) }

// KwokStageConfigs are the files of KwokStages.
func (t Tools) KwokStageConfigs() []string {
	out := make([]string, len(KwokStages))
	for i, s := range KwokStages {
		out[i] = filepath.Join(t.dir, StagesDir, s)
	}
	return out
}

// Pinned is the version each binary should report.
func Pinned(n Name) string {
	switch n {
	case Kwok:
		return KwokVersion
	case Etcd:
		return EtcdVersion
	}
	return KubernetesVersion
}

// Version runs the binary with --version and returns the version it
// reports (e.g. "v1.37.2"; etcd's and kwok's get a leading v).
func (t Tools) Version(ctx context.Context, n Name) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.Path(n), "--version")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + os.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", ecode.Errorf(ecode.Environ, "k8sbin: %s --version: %w", t.Path(n), err)
	}
	v, ok := parseVersion(n, out)
	if !ok {
		return "", ecode.Errorf(ecode.Environ, "k8sbin: %s --version printed no version: %q", t.Path(n), firstLine(out))
	}
	return v, nil
}

// CheckVersions compares what each binary reports with the pinned
// versions; a mismatch names the make target that rebuilds them.
func (t Tools) CheckVersions(ctx context.Context, names ...Name) error {
	if len(names) == 0 {
		names = ControlPlane
	}
	var errs []error
	for _, n := range names {
		v, err := t.Version(ctx, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v != Pinned(n) {
			errs = append(errs, ecode.Errorf(ecode.Environ, "k8sbin: %s is %s, Corral runs %s: rebuild with `%s`", t.Path(n), v, Pinned(n), MakeTarget))
		}
	}
	return errors.Join(errs...)
}

// parseVersion reads the version from the output of `n --version`:
//
//	Kubernetes v1.37.2                       (kube-*, kubelet)
//	etcd Version: 3.6.16                     (etcd, first of several lines)
//	kwok version v0.8.0 (go1.26.8) ...       (kwok)
func parseVersion(n Name, out []byte) (string, bool) {
	for line := range bytes.Lines(out) {
		f := strings.Fields(string(line))
		switch {
		case n == Etcd && len(f) == 3 && f[0] == "etcd" && f[1] == "Version:":
			return "v" + strings.TrimPrefix(f[2], "v"), true
		case n == Kwok && len(f) >= 3 && f[0] == "kwok" && f[1] == "version":
			return "v" + strings.TrimPrefix(f[2], "v"), true
		case n != Etcd && n != Kwok && len(f) == 2 && f[0] == "Kubernetes":
			return f[1], true
		}
	}
	return "", false
}

func firstLine(b []byte) string {
	l, _, _ := bytes.Cut(b, []byte("\n"))
	if len(l) > 200 {
		l = l[:200]
	}
	return string(l)
}
