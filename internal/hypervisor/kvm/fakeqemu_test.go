package kvm

// A stand-in for qemu, so the driver's process handling (daemonizing, pid
// files, QMP, restart recovery, kill after timeout) is tested without booting
// a guest. The test binary becomes the fake when CORRAL_TEST_FAKE_QEMU is set;
// a small wrapper script sets it, because the driver gives qemu a clean
// environment.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	fakeModeNormal   = "normal"   // powers off on system_powerdown
	fakeModeStubborn = "stubborn" // ignores system_powerdown
	fakeModeFail     = "fail"     // fails to start, like a qemu that cannot open a disk
)

func TestMain(m *testing.M) {
	switch os.Getenv("CORRAL_TEST_FAKE_QEMU") {
	case "launcher":
		os.Exit(fakeQemuLauncher(os.Args[1:]))
	case "daemon":
		os.Exit(fakeQemuDaemon(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeQemuBinary writes a wrapper script that runs this test binary as a fake
// qemu in the given mode.
func fakeQemuBinary(t *testing.T, mode string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fake-qemu")
	// GORACE: a race-enabled binary otherwise sleeps a second at exit.
	script := fmt.Sprintf("#!/bin/sh\nGORACE=atexit_sleep_ms=0 CORRAL_TEST_FAKE_QEMU=launcher FAKE_QEMU_MODE=%s exec %q \"$@\"\n", mode, self)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeArgs holds the qemu options the fake understands.
type fakeArgs struct {
	uuid, pidfile, qmp, serial, serialLog string
	daemonize                             bool
}

func parseFakeArgs(args []string) fakeArgs {
	var a fakeArgs
	opt := func(s, key string) string {
		for _, kv := range strings.Split(s, ",") {
			if v, ok := strings.CutPrefix(kv, key+"="); ok {
				return v
			}
		}
		return ""
	}
	for i := 0; i < len(args); i++ {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		switch args[i] {
		case "-uuid":
			a.uuid = next
		case "-pidfile":
			a.pidfile = next
		case "-qmp":
			a.qmp = strings.TrimPrefix(strings.Split(next, ",")[0], "unix:")
		case "-chardev":
			a.serial, a.serialLog = opt(next, "path"), opt(next, "logfile")
		case "-daemonize":
			a.daemonize = true
		}
	}
	return a
}

func fakeQemuLauncher(args []string) int {
	mode := os.Getenv("FAKE_QEMU_MODE")
	if len(args) == 1 && args[0] == "-help" {
		fmt.Println("QEMU emulator (fake)\n-runas user     change to user id user just before starting the VM")
		return 0
	}
	if mode == fakeModeFail {
		fmt.Fprintln(os.Stderr, "fake-qemu: -drive file=/nonexistent: Could not open '/nonexistent': No such file or directory")
		return 1
	}
	if !parseFakeArgs(args).daemonize {
		fmt.Fprintln(os.Stderr, "fake-qemu: only -daemonize is supported")
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, args...)
	cmd.Env = []string{"CORRAL_TEST_FAKE_QEMU=daemon", "FAKE_QEMU_MODE=" + mode, "GORACE=atexit_sleep_ms=0"}
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w.Close()
	// Like qemu's parent: exit once the daemon says it is ready, fail if it
	// dies first.
	if n, _ := r.Read(make([]byte, 1)); n != 1 {
		fmt.Fprintln(os.Stderr, "fake-qemu: daemon failed to start")
		return 1
	}
	return 0
}

func fakeQemuDaemon(args []string) int {
	a := parseFakeArgs(args)
	ready := os.NewFile(3, "ready")
	qmpL, err := net.Listen("unix", a.qmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if a.serial != "" {
		serL, err := net.Listen("unix", a.serial)
		if err != nil {
			return 1
		}
		logf, err := os.OpenFile(a.serialLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return 1
		}
		fmt.Fprintf(logf, "FAKE-GUEST-BOOTED uuid=%s\n", a.uuid)
		go serveEcho(serL, logf)
	}
	if err := os.WriteFile(a.pidfile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
		return 1
	}
	ready.Write([]byte{1})
	ready.Close()
	// Never outlive a test run that forgot to stop us.
	time.AfterFunc(2*time.Minute, func() { os.Exit(3) })

	f := &fakeQMP{status: "running"}
	if os.Getenv("FAKE_QEMU_MODE") != fakeModeStubborn {
		f.onPowerdown = func() { os.Exit(0) }
	}
	f.onQuit = func() { os.Exit(0) }
	for {
		conn, err := qmpL.Accept()
		if err != nil {
			return 1
		}
		f.serve(conn) // one client at a time, as qemu does
	}
}

func serveEcho(l net.Listener, log io.Writer) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_, _ = io.Copy(io.MultiWriter(conn, log), conn)
		}()
	}
}

// fakeQMP is a QMP server good enough for the driver and the client tests.
type fakeQMP struct {
	mu          sync.Mutex
	status      string
	commands    []string
	onPowerdown func()
	onQuit      func()
	noGreeting  bool
}

func (f *fakeQMP) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.commands...)
}

func (f *fakeQMP) serve(conn net.Conn) {
	defer conn.Close()
	send := func(v any) {
		data, _ := json.Marshal(v)
		_, _ = conn.Write(append(data, '\r', '\n'))
	}
	if f.noGreeting {
		_, _ = io.Copy(io.Discard, conn)
		return
	}
	send(map[string]any{"QMP": map[string]any{"version": map[string]any{"qemu": map[string]int{"major": 7, "minor": 2, "micro": 0}}, "capabilities": []string{"oob"}}})
	dec := json.NewDecoder(conn)
	negotiated := false
	for {
		var req struct {
			Execute   string          `json:"execute"`
			Arguments json.RawMessage `json:"arguments"`
			ID        json.RawMessage `json:"id"`
		}
		if err := dec.Decode(&req); err != nil {
			return
		}
		f.mu.Lock()
		f.commands = append(f.commands, req.Execute)
		status := f.status
		f.mu.Unlock()
		reply := func(v any) {
			m := map[string]any{"return": v}
			if req.ID != nil {
				m["id"] = req.ID
			}
			send(m)
		}
		fail := func(class, desc string) {
			m := map[string]any{"error": map[string]string{"class": class, "desc": desc}}
			if req.ID != nil {
				m["id"] = req.ID
			}
			send(m)
		}
		event := func(name string) {
			send(map[string]any{"event": name, "timestamp": map[string]int{"seconds": 1, "microseconds": 2}})
		}
		if !negotiated && req.Execute != "qmp_capabilities" {
			fail("CommandNotFound", "Expecting capabilities negotiation with 'qmp_capabilities'")
			continue
		}
		switch req.Execute {
		case "qmp_capabilities":
			negotiated = true
			reply(map[string]any{})
		case "query-status":
			event("RTC_CHANGE") // an event before the reply must be skipped
			reply(map[string]any{"status": status, "singlestep": false, "running": status == "running"})
		case "system_powerdown":
			reply(map[string]any{})
			event("POWERDOWN")
			if f.onPowerdown != nil {
				f.onPowerdown()
			}
		case "system_reset":
			reply(map[string]any{})
			event("RESET")
		case "quit":
			if f.onQuit != nil {
				conn.Close() // qemu may hang up before its reply is read
				f.onQuit()
				return
			}
			reply(map[string]any{})
		default:
			fail("CommandNotFound", "The command "+req.Execute+" has not been found")
		}
	}
}
