package osapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// dumpEnv prints the exact environment the script received (a shell exports
// extra variables such as PWD, so `env` would not do), then its cwd and args.
const dumpEnv = "#!/bin/sh\ntr '\\000' '\\n' < /proc/$$/environ\necho \"@cwd=$(pwd -P)\"\necho \"@args=$*\"\n"

type fixture struct {
	search string
	os     *OS
	runner *Runner
	logs   *bytes.Buffer
}

func newFixture(t *testing.T, scripts map[string]string) *fixture {
	t.Helper()
	search := t.TempDir()
	makeOS(t, search, "debootstrap", scripts)
	o, err := Find([]string{search}, "debootstrap")
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	return &fixture{
		search: search, os: o, logs: logs,
		runner: &Runner{LogDir: filepath.Join(t.TempDir(), "os"), Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
	}
}

// parseDump splits a dumpEnv log into the sorted environment, cwd and args.
func parseDump(t *testing.T, path string) (env []string, cwd, args string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "@cwd="):
			cwd = strings.TrimPrefix(line, "@cwd=")
		case strings.HasPrefix(line, "@args="):
			args = strings.TrimPrefix(line, "@args=")
		default:
			env = append(env, line)
		}
	}
	slices.Sort(env)
	return env, cwd, args
}

func withEntries(base []string, extra ...string) []string {
	m := map[string]string{}
	for _, kv := range append(slices.Clone(base), extra...) {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func TestRunCreateCleanEnvironment(t *testing.T) {
	t.Setenv("FOO", "must-not-leak")
	f := newFixture(t, map[string]string{ScriptCreate: dumpEnv})
	inst := testInstance()
	for _, reinstall := range []bool{false, true} {
		logPath, err := f.runner.RunCreate(context.Background(), f.os, inst, reinstall)
		if err != nil {
			t.Fatal(err)
		}
		env, cwd, args := parseDump(t, logPath)
		want := withEntries(InstanceEnv(f.os, inst), "OSP_ROOT_PASSWORD=s3cret-pw")
		if reinstall {
			want = withEntries(want, "INSTANCE_REINSTALL=1")
		}
		if !reflect.DeepEqual(env, want) {
			t.Fatalf("reinstall=%v: environment differs:\n got %q\nwant %q", reinstall, env, want)
		}
		if cwd != f.os.Path || args != "" {
			t.Errorf("cwd %q args %q", cwd, args)
		}
		name := filepath.Base(logPath)
		if !regexp.MustCompile(`^add-debootstrap\+minimal-inst1\.example\.com-\d{4}-\d\d-\d\d_\d\d_\d\d_\d\d(-\d+)?\.log$`).MatchString(name) {
			t.Errorf("log name %q", name)
		}
		if filepath.Dir(logPath) != f.runner.LogDir {
			t.Errorf("log in %s", filepath.Dir(logPath))
		}
		st, err := os.Stat(logPath)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("log mode: %v %v", st.Mode(), err)
		}
	}
}

func TestRunFailureCarriesLastLines(t *testing.T) {
	f := newFixture(t, map[string]string{
		ScriptCreate: "#!/bin/sh\ni=1\nwhile [ $i -le 30 ]; do echo \"out $i\"; echo \"err $i\" >&2; i=$((i+1)); done\nexit 3\n",
	})
	logPath, err := f.runner.RunCreate(context.Background(), f.os, testInstance(), false)
	e, ok := ecode.As(err)
	if !ok || e.Kind != ecode.OpExecError {
		t.Fatalf("want OpExecError, got %#v", err)
	}
	if logPath == "" {
		t.Fatal("a failed run still returns its log")
	}
	if !strings.Contains(e.Msg, "'create'") || !strings.Contains(e.Msg, "exit status 3") || !strings.Contains(e.Msg, "inst1.example.com") {
		t.Fatalf("message lacks script, status or instance: %s", e.Msg)
	}
	_, tail, found := strings.Cut(e.Msg, ":\n")
	if !found {
		t.Fatalf("no log tail in %q", e.Msg)
	}
	var want []string
	for i := 21; i <= 30; i++ {
		want = append(want, fmt.Sprintf("out %d", i), fmt.Sprintf("err %d", i))
	}
	if got := strings.Split(tail, "\n"); !reflect.DeepEqual(got, want) {
		t.Fatalf("tail:\n%q\nwant\n%q", got, want)
	}
}

func TestRunCancelKillsProcessGroup(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The script starts a background child, reports its pid, and waits.
	f := newFixture(t, map[string]string{ScriptCreate: "#!/bin/sh\nsleep 300 &\necho $! > \"$OSP_READY\"\nwait\n"})
	inst := testInstance()
	inst.OSParams = map[string]string{"ready": fifo}
	inst.OSParamsSecret = nil

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pidc := make(chan int, 1)
	go func() {
		defer cancel()
		fh, err := os.Open(fifo) // blocks until the script opens it
		if err != nil {
			pidc <- -1
			return
		}
		defer fh.Close()
		line, _ := bufio.NewReader(fh).ReadString('\n')
		pid, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			pid = -1
		}
		pidc <- pid
	}()
	_, err := f.runner.RunCreate(ctx, f.os, inst, false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled in chain, got %v", err)
	}
	if ecode.ClassOf(err) != ecode.Fault {
		t.Errorf("class %s", ecode.ClassOf(err))
	}
	pid := <-pidc
	if pid <= 0 {
		t.Fatal("script did not report its child")
	}
	// The kill is asynchronous; give the kernel a bounded time to finish it.
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d survived cancellation", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processGone reports whether pid no longer runs (absent or a zombie).
func processGone(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

func TestRunTimeout(t *testing.T) {
	f := newFixture(t, map[string]string{ScriptRename: "#!/bin/sh\necho started\nexec sleep 300\n"})
	f.runner.Timeout = 50 * time.Millisecond
	_, err := f.runner.RunRename(context.Background(), f.os, testInstance(), "old")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("want a timeout error, got %v", err)
	}
}

func TestSecretParamsStayOutOfOurOutput(t *testing.T) {
	const pw = "s3cret-pw"
	multi := secret.Secret("-----BEGIN KEY-----\nAAAAsecretkeyline\n-----END KEY-----")
	f := newFixture(t, map[string]string{
		ScriptCreate: "#!/bin/sh\necho \"pw=$OSP_ROOT_PASSWORD\"\necho \"$OSP_SSH_KEY\" >&2\nexit 1\n",
	})
	inst := testInstance()
	inst.OSParamsSecret = map[string]secret.Secret{"root-password": pw, "ssh-key": multi}
	logPath, err := f.runner.RunCreate(context.Background(), f.os, inst, false)
	if err == nil {
		t.Fatal("script should fail")
	}
	logData, _ := os.ReadFile(logPath)
	if !strings.Contains(string(logData), "pw="+pw) {
		t.Fatal("the script's own log should hold what it printed")
	}
	ours := err.Error() + "\n" + fmt.Sprintf("%+v %#v", err, err) + "\n" + f.logs.String()
	for _, s := range []string{pw, "secretkeyline"} {
		if strings.Contains(ours, s) {
			t.Fatalf("secret %q leaked into our output:\n%s", s, ours)
		}
	}
	if !strings.Contains(err.Error(), "pw=<redacted>") {
		t.Fatalf("tail should show the redaction: %s", err)
	}

	// A NUL in a secret value is refused without showing the value.
	inst.OSParamsSecret = map[string]secret.Secret{"root-password": "bad\x00" + pw}
	_, err = f.runner.RunCreate(context.Background(), f.os, inst, false)
	if ecode.ClassOf(err) != ecode.Inval || strings.Contains(err.Error(), pw) {
		t.Fatalf("NUL value: %v", err)
	}
}

func TestLastLinesRedactsAcrossWindowEdge(t *testing.T) {
	sec := "TOPSECRET\nSECONDHALF"
	path := filepath.Join(t.TempDir(), "log")
	// The secret occupies bytes [101, 121) and the read window starts at
	// byte 105, before the secret's own newline: cutting the first partial
	// line there would otherwise leave "SECONDHALF" in the tail.
	prefix := strings.Repeat("x", 100) + "\n"
	body := prefix + sec + strings.Repeat("y", tailWindow-22) + "\nlast\n"
	if off := len(body) - tailWindow; off != 105 {
		t.Fatalf("window starts at %d", off)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got := lastLines(path, 20, []string{sec})
	if strings.Contains(got, "SECONDHALF") || strings.Contains(got, "TOPSECRET") {
		t.Fatalf("secret fragment in tail: %.80q", got)
	}
	if !strings.HasSuffix(got, "\nlast") {
		t.Fatalf("tail: ...%q", got[max(0, len(got)-40):])
	}
}

func TestLastLinesShortAndLong(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("a\nb\n"), 0o600)
	if got := lastLines(short, 20, nil); got != "a\nb" {
		t.Errorf("short: %q", got)
	}
	long := filepath.Join(dir, "long")
	os.WriteFile(long, []byte(strings.Repeat("z", 3*tailWindow)+"\n"), 0o600)
	if got := lastLines(long, 20, nil); got != "" {
		t.Errorf("a single line longer than the window is dropped, got %d bytes", len(got))
	}
	if got := lastLines(filepath.Join(dir, "missing"), 20, nil); !strings.Contains(got, "unreadable") {
		t.Errorf("missing: %q", got)
	}
}

func TestRunRename(t *testing.T) {
	f := newFixture(t, map[string]string{ScriptRename: dumpEnv})
	inst := testInstance()
	inst.Name = "new.example.com"
	logPath, err := f.runner.RunRename(context.Background(), f.os, inst, "old.example.com")
	if err != nil {
		t.Fatal(err)
	}
	env, _, _ := parseDump(t, logPath)
	want := withEntries(InstanceEnv(f.os, inst), "OLD_INSTANCE_NAME=old.example.com")
	if !reflect.DeepEqual(env, want) {
		t.Fatalf("got %q\nwant %q", env, want)
	}
	if slices.Contains(env, "OSP_ROOT_PASSWORD=s3cret-pw") {
		t.Fatal("secret params are for create only")
	}
	if !strings.HasPrefix(filepath.Base(logPath), "rename-debootstrap+minimal-new.example.com-") {
		t.Errorf("log name %s", logPath)
	}
}

func TestRunVerify(t *testing.T) {
	f := newFixture(t, map[string]string{ScriptVerify: dumpEnv})
	params := map[string]string{"dhcp": "no"}
	logPath, err := f.runner.RunVerify(context.Background(), f.os, "minimal", params, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, _, args := parseDump(t, logPath)
	if want := CoreEnv(f.os, "minimal", params, 0); !reflect.DeepEqual(env, want) {
		t.Fatalf("got %q\nwant %q", env, want)
	}
	if args != "parameters" {
		t.Fatalf("args %q", args)
	}

	entries, _ := os.ReadDir(f.runner.LogDir)
	_, err = f.runner.RunVerify(context.Background(), f.os, "", map[string]string{"bogus": "1"}, nil)
	if ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("unknown parameter: %v", err)
	}
	if after, _ := os.ReadDir(f.runner.LogDir); len(after) != len(entries) {
		t.Fatal("the script must not run for undeclared parameters")
	}

	old := *f.os
	old.APIVersion = 15
	if p, err := f.runner.RunVerify(context.Background(), &old, "", params, nil); p != "" || err != nil {
		t.Fatalf("API 15 verify should be skipped: %q %v", p, err)
	}
}

func TestRunVerifyFailure(t *testing.T) {
	f := newFixture(t, map[string]string{ScriptVerify: "#!/bin/sh\necho \"invalid value for dhcp: $OSP_DHCP\"\necho \"password was $OSP_ROOT_PASSWORD\" >&2\nexit 3\n"})
	_, err := f.runner.RunVerify(context.Background(), f.os, "", map[string]string{"dhcp": "maybe"},
		map[string]secret.Secret{"root-password": "hunter2-secret"})
	if err == nil || !strings.Contains(err.Error(), "invalid value for dhcp: maybe") {
		t.Fatalf("verify diagnostics missing: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "OS validation script failed (exited with exit code 3), output: ") {
		t.Fatalf("want Ganeti's validation text, got %v", err)
	}
	if strings.Contains(err.Error(), "hunter2-secret") || !strings.Contains(err.Error(), "password was <redacted>") {
		t.Fatalf("a private parameter's value must not reach the error: %v", err)
	}
}

func TestRunVerifySeesPrivateParams(t *testing.T) {
	f := newFixture(t, map[string]string{ScriptVerify: dumpEnv})
	logPath, err := f.runner.RunVerify(context.Background(), f.os, "", map[string]string{"dhcp": "no"},
		map[string]secret.Secret{"root-password": "s3"})
	if err != nil {
		t.Fatal(err)
	}
	env, _, _ := parseDump(t, logPath)
	if !slices.Contains(env, "OSP_ROOT_PASSWORD=s3") || !slices.Contains(env, "OSP_DHCP=no") {
		t.Fatalf("verify env %q lacks the parameters", env)
	}
	_, err = f.runner.RunVerify(context.Background(), f.os, "", nil, map[string]secret.Secret{"bogus": "x"})
	if ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("an undeclared private parameter must be refused: %v", err)
	}
}

func TestRunExportImportStreams(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk.raw")
	payload := make([]byte, 3<<20)
	rand.Read(payload)
	if err := os.WriteFile(disk, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, map[string]string{
		ScriptExport: "#!/bin/sh\necho \"exporting $EXPORT_INDEX $EXPORT_DISK_PATH\" >&2\n[ \"$EXPORT_DEVICE\" = \"$EXPORT_DISK_PATH\" ] || exit 9\ncat \"$EXPORT_DEVICE\"\n",
		ScriptImport: "#!/bin/sh\necho \"importing $IMPORT_INDEX\" >&2\n[ \"$IMPORT_DEVICE\" = \"$IMPORT_DISK_PATH\" ] || exit 9\ncat > \"$IMPORT_DEVICE\"\n",
	})
	inst := testInstance()
	inst.Disks[1].Path = disk

	var out bytes.Buffer
	logPath, err := f.runner.RunExport(context.Background(), f.os, inst, 1, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), payload) {
		t.Fatalf("exported %d bytes, want the %d-byte disk", out.Len(), len(payload))
	}
	logData, _ := os.ReadFile(logPath)
	if string(logData) != "exporting 1 "+disk+"\n" {
		t.Fatalf("export log must hold stderr only: %.100q", logData)
	}

	target := filepath.Join(t.TempDir(), "target.raw")
	inst.Disks[0].Path = target
	logPath, err = f.runner.RunImport(context.Background(), f.os, inst, 0, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(target)
	if !bytes.Equal(got, payload) {
		t.Fatalf("imported %d bytes", len(got))
	}
	if logData, _ := os.ReadFile(logPath); string(logData) != "importing 0\n" {
		t.Fatalf("import log: %q", logData)
	}
	if !strings.Contains(filepath.Base(logPath), "-disk0-") {
		t.Errorf("log name %s", logPath)
	}

	if _, err := f.runner.RunImport(context.Background(), f.os, inst, 2, bytes.NewReader(nil)); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("bad disk index: %v", err)
	}
}

func TestRunCreateUntrustedOnly(t *testing.T) {
	search := t.TempDir()
	dir := makeOS(t, search, "untrusted", nil)
	rm(t, dir, ScriptCreate)
	writeFile(t, filepath.Join(dir, ScriptCreateUntrusted), okScript, 0o755)
	o, err := Find([]string{search}, "untrusted")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{LogDir: t.TempDir()}
	if _, err := r.RunCreate(context.Background(), o, testInstance(), false); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("untrusted create: %v", err)
	}
}

func TestRunRefusesInvalidOS(t *testing.T) {
	r := &Runner{LogDir: t.TempDir()}
	bad := &OS{Name: "x", Error: "broken"}
	if _, err := r.RunRename(context.Background(), bad, testInstance(), "a"); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("invalid OS: %v", err)
	}
	if _, err := r.RunRename(context.Background(), nil, testInstance(), "a"); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("nil OS: %v", err)
	}
}

func TestLogNamesAreSafeAndUnique(t *testing.T) {
	r := &Runner{LogDir: t.TempDir()}
	seen := map[string]bool{}
	for range 3 {
		f, p, err := r.openLog("add", []string{"deb+v", "../../etc/x y"})
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if filepath.Dir(p) != r.LogDir || strings.ContainsAny(filepath.Base(p), "/ ") {
			t.Fatalf("unsafe log path %q", p)
		}
		if seen[p] {
			t.Fatalf("log %s reused", p)
		}
		seen[p] = true
	}
}

// TestPrivateParamsReachEveryScriptButNoError: private OS parameters are in
// the environment of the rename script (not only create's), and a failing
// script that prints one does not put its value into our error.
func TestPrivateParamsReachEveryScriptButNoError(t *testing.T) {
	f := newFixture(t, map[string]string{ScriptRename: dumpEnv})
	inst := testInstance()
	inst.OSParamsPrivate = map[string]secret.Secret{"dhcp": "private-dhcp-value"}
	logPath, err := f.runner.RunRename(context.Background(), f.os, inst, "old")
	if err != nil {
		t.Fatal(err)
	}
	env, _, _ := parseDump(t, logPath)
	if !slices.Contains(env, "OSP_DHCP=private-dhcp-value") {
		t.Fatalf("rename env lacks the private parameter: %q", env)
	}

	f = newFixture(t, map[string]string{ScriptRename: "#!/bin/sh\necho \"dhcp is $OSP_DHCP\"\nexit 1\n"})
	_, err = f.runner.RunRename(context.Background(), f.os, inst, "old")
	if err == nil || strings.Contains(err.Error(), "private-dhcp-value") || !strings.Contains(err.Error(), "dhcp is <redacted>") {
		t.Fatalf("the private value must be redacted from the error: %v", err)
	}
	if strings.Contains(f.logs.String(), "private-dhcp-value") {
		t.Fatal("the private value reached the runner's own log lines")
	}
}
