package bmc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// lock serialises chassis actions on one machine across processes: ipmi_sim
// runs a chassis program per request while a Redfish service may act on the
// same directory.
func (m *Machine) lock() (func(), error) {
	f, err := os.OpenFile(m.path(lockFile), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("machine %s lock: %w", m.Config.Name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("machine %s lock: %w", m.Config.Name, err)
	}
	return func() { f.Close() }, nil
}

// logf appends one line to the machine's chassis log, the record of what
// the BMC was asked to do. Failing to log never fails the action.
func (m *Machine) logf(format string, args ...any) {
	f, err := os.OpenFile(m.path(chassisLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// PID returns the pid of the machine's qemu when it runs. A daemonized
// qemu is reparented to pid 1, which may reap it late: a zombie counts as
// off. The pid must still be a qemu using this directory's monitor, so a
// stale pid file whose number was reused is not taken for the machine.
func (m *Machine) PID() (int, bool) {
	data, err := os.ReadFile(m.path(pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, m.isOurQemu(pid)
}

func (m *Machine) isOurQemu(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may itself
	// hold spaces or parentheses: read after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return bytes.Contains(cmdline, []byte(m.path(qmpSocket)))
}

// PoweredOn reports whether the machine's qemu runs.
func (m *Machine) PoweredOn() bool {
	_, on := m.PID()
	return on
}

// PowerOn starts the machine unless it runs, booting from the boot override
// (consumed when it was not persistent).
func (m *Machine) PowerOn(ctx context.Context) error {
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if m.PoweredOn() {
		m.logf("power on: already on")
		return nil
	}
	boot, err := m.BootOverride()
	if err != nil {
		return err
	}
	media, err := m.Media()
	if err != nil {
		return err
	}
	args, err := m.qemuArgs(boot.Device, media)
	if err != nil {
		return err
	}
	for _, stale := range []string{pidFile, qmpSocket, serialSock} {
		os.Remove(m.path(stale))
	}
	if err := m.startQemu(ctx, args); err != nil {
		return err
	}
	m.logf("power on: boot=%s pid-file=%s", boot.Device, m.path(pidFile))
	if !boot.Persistent && boot.Device != BootNone {
		return m.writeBoot(BootOverride{Device: BootNone})
	}
	return nil
}

// startQemu runs qemu, which daemonizes once the machine exists: when the
// command returns, the pid file is written or qemu failed.
func (m *Machine) startQemu(ctx context.Context, args []string) error {
	bin := m.Config.Qemu
	if bin == "" {
		bin = "qemu-system-x86_64"
	}
	argv := append([]string{bin}, args...)
	if m.Config.NetNS != "" {
		argv = append([]string{"ip", "netns", "exec", m.Config.NetNS}, argv...)
	}
	out, err := os.OpenFile(m.path(qemuOutput), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("machine %s qemu output: %w", m.Config.Name, err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = m.Dir
	if err := cmd.Run(); err != nil {
		tail := lastLines(m.path(qemuOutput), 5)
		return ecode.ExecErrorf("machine %s: qemu did not start: %w (%s)", m.Config.Name, err, tail)
	}
	if !m.PoweredOn() {
		return ecode.ExecErrorf("machine %s: qemu exited right after starting (%s)", m.Config.Name, lastLines(m.path(qemuOutput), 5))
	}
	return nil
}

func lastLines(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// PowerOff kills the machine's qemu at once (pulling the power cord) and
// waits until it is gone.
func (m *Machine) PowerOff(ctx context.Context) error {
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	pid, on := m.PID()
	if !on {
		m.logf("power off: already off")
		os.Remove(m.path(pidFile))
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return ecode.ExecErrorf("machine %s: kill qemu %d: %w", m.Config.Name, pid, err)
	}
	if err := m.waitOff(ctx, 10*time.Second); err != nil {
		return err
	}
	m.logf("power off: killed %d", pid)
	if err := os.Remove(m.path(pidFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("machine %s pid file: %w", m.Config.Name, err)
	}
	return nil
}

// waitOff polls until qemu is gone or d passes.
func (m *Machine) waitOff(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for m.PoweredOn() {
		if time.Now().After(deadline) {
			return ecode.ExecErrorf("machine %s: qemu still runs %s after the kill", m.Config.Name, d)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("machine %s: waiting for power off: %w", m.Config.Name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Reset presses the reset button: the machine reboots at once, from the
// same boot device. A machine that is off stays off.
func (m *Machine) Reset(ctx context.Context) error {
	return m.qmpIfOn(ctx, "reset", "system_reset")
}

// SoftOff presses the power button (ACPI): the operating system shuts
// down if it listens.
func (m *Machine) SoftOff(ctx context.Context) error {
	return m.qmpIfOn(ctx, "soft off", "system_powerdown")
}

func (m *Machine) qmpIfOn(ctx context.Context, what, command string) error {
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if !m.PoweredOn() {
		m.logf("%s: machine is off", what)
		return nil
	}
	if _, err := qmpDo(ctx, m.path(qmpSocket), command, nil); err != nil {
		return ecode.ExecErrorf("machine %s %s: %w", m.Config.Name, what, err)
	}
	m.logf("%s", what)
	return nil
}

// gracefulRestartWait bounds how long a graceful restart waits for the
// operating system to power the machine off.
const gracefulRestartWait = time.Minute

// GracefulRestart presses the power button, waits up to wait for the
// operating system to power off, then powers the machine on again. A
// machine that is off is just powered on.
func (m *Machine) GracefulRestart(ctx context.Context, wait time.Duration) error {
	if m.PoweredOn() {
		if err := m.SoftOff(ctx); err != nil {
			return err
		}
		if err := m.waitOff(ctx, wait); err != nil {
			return ecode.ExecErrorf("machine %s: the operating system did not power off within %s of the power button: %w", m.Config.Name, wait, err)
		}
	}
	return m.PowerOn(ctx)
}
