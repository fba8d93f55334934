package bmctest

import (
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Qemu is a qemu-system-x86_64 a test started with StartQemu.
type Qemu struct {
	// Started is when qemu was started: the machine's power on.
	Started time.Time
	// Exited is closed when qemu has exited.
	Exited <-chan struct{}

	out     SyncBuffer
	waitErr error
}

// StartQemu boots a machine on kernel and initrd with the kernel command
// line cmdline: qemu-system-x86_64 with TCG, 256 MiB, no default devices,
// no display and no reboot (a reboot or power off ends qemu), and args
// after that (serial, network, disk). qemu runs in a process group of its
// own, killed (with the socat of a guestfwd in it) and waited for when the
// test ends.
func StartQemu(t testing.TB, kernel, initrd, cmdline string, args ...string) *Qemu {
	t.Helper()
	cmd := exec.Command("qemu-system-x86_64", append([]string{"-accel", "tcg", "-m", "256", "-nodefaults", "-display", "none",
		"-no-reboot", "-kernel", kernel, "-initrd", initrd, "-append", cmdline}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	q := &Qemu{}
	// exec copies qemu's output from a goroutine of its own while the
	// test may read it for a failure message.
	cmd.Stdout, cmd.Stderr = &q.out, &q.out
	q.Started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting qemu: %v", err)
	}
	exited := make(chan struct{})
	q.Exited = exited
	go func() { q.waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	return q
}

// Output is what qemu wrote on its stdout and stderr so far.
func (q *Qemu) Output() string { return q.out.String() }

// Err is how qemu ended; only once Exited is closed.
func (q *Qemu) Err() error { return q.waitErr }

// FreeTCPPort is a TCP port free on 127.0.0.1 a moment ago, for a server
// (or a qemu hostfwd) the test starts next.
func FreeTCPPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
