package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// handle is one running process of a component: a child this process
// started, or a process adopted from a pid file. Both are watched and
// signalled through a pidfd, so a pid the kernel reuses after the process
// is gone is never signalled.
type handle struct {
	pid     int
	pidfd   *os.File
	adopted bool
	started time.Time
	// done closes when the process has exited; status says how, when it
	// is known (a child's exit status; an adopted process's is not ours
	// to collect).
	done   chan struct{}
	status string
	once   sync.Once
}

// openPidfd opens a non-blocking pidfd, which the runtime's poller can
// wait on.
func openPidfd(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	return os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid)), nil
}

// startChild starts c as uid:gid in a session of its own, output appended
// to logPath, and returns its handle.
func startChild(c Component, dir string, uid, gid int, logPath string) (*handle, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the log of %s: %w", c.Name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "---- %s corral starts %s\n", time.Now().UTC().Format(time.RFC3339), c.Name)
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = dir
	cmd.Env = c.Env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// A session of its own: neither a signal to the node daemon's
		// process group nor its exit takes the control plane along.
		Setsid:     true,
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Name, err)
	}
	h := &handle{pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{})}
	// The child cannot be reaped before Wait below, so its pid is still
	// the child's here.
	h.pidfd, err = openPidfd(h.pid)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	go func() {
		err := cmd.Wait()
		h.status = exitStatus(cmd.ProcessState, err)
		close(h.done)
	}()
	return h, nil
}

func exitStatus(ps *os.ProcessState, err error) string {
	if ps == nil {
		return err.Error()
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return "exited with status " + strconv.Itoa(ps.ExitCode())
}

// adopt returns a handle on the process the pid file names when it is
// exactly argv run by uid; nil when there is no such process.
func adopt(pidPath string, argv []string, uid int) *handle {
	b, err := os.ReadFile(pidPath)
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return nil
	}
	pidfd, err := openPidfd(pid)
	if err != nil {
		return nil
	}
	// Checked after the pidfd is open: if the pid was reused in between,
	// the pidfd's process has exited and pidfdExited says so below.
	got, owner, err := readProc(pid)
	if err != nil || owner != uid || !slices.Equal(got, argv) || pidfdExited(pidfd) {
		pidfd.Close()
		return nil
	}
	h := &handle{pid: pid, pidfd: pidfd, adopted: true, started: time.Now(), done: make(chan struct{})}
	go h.watch()
	return h
}

// watch closes done when the adopted process exits, or when the handle
// is released.
func (h *handle) watch() {
	rc, err := h.pidfd.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool { return fdReadable(int(fd)) })
	}
	if err == nil {
		h.status = "exited"
	} else {
		h.status = "no longer watched"
	}
	close(h.done)
}

func pidfdExited(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	exited := true
	_ = rc.Control(func(fd uintptr) { exited = fdReadable(int(fd)) })
	return exited
}

// fdReadable polls without waiting: a pidfd is readable once its process
// has exited.
func fdReadable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err != nil || n > 0
	}
}

// signal sends sig to the process, if it still runs.
func (h *handle) signal(sig syscall.Signal) error {
	rc, err := h.pidfd.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return err
	}
	if errors.Is(serr, unix.ESRCH) {
		return nil
	}
	return serr
}

func (h *handle) exited() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// terminate stops the process: SIGTERM, then SIGKILL after grace.
func (h *handle) terminate(grace time.Duration) {
	if h.exited() {
		return
	}
	_ = h.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-h.done:
		return
	case <-t.C:
	}
	_ = h.signal(syscall.SIGKILL)
	<-h.done
}

// release stops watching; the process keeps running.
func (h *handle) release() {
	h.once.Do(func() { h.pidfd.Close() })
}

// readProc reads a process's command line and owner from /proc.
func readProc(pid int) (argv []string, uid int, err error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return nil, -1, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, -1, err
	}
	if len(b) == 0 { // a zombie or a kernel thread
		return nil, -1, fmt.Errorf("process %d has no command line", pid)
	}
	argv = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	return argv, int(fi.Sys().(*syscall.Stat_t).Uid), nil
}

// clusterProcesses lists the processes of uid running one of paths with
// an argument under dir: this cluster's components, whatever their pid
// files say.
func clusterProcesses(paths []string, dir string, uid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		argv, owner, err := readProc(pid)
		if err != nil || owner != uid || !slices.Contains(paths, argv[0]) {
			continue
		}
		if slices.ContainsFunc(argv[1:], func(a string) bool { return strings.Contains(a, dir+string(filepath.Separator)) }) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killStrays terminates the given processes of the cluster (which are
// neither children nor adopted) through pidfds.
func killStrays(pids []int, argvOK func(argv []string) bool, uid int, grace time.Duration) {
	var hs []*handle
	for _, pid := range pids {
		pidfd, err := openPidfd(pid)
		if err != nil {
			continue
		}
		argv, owner, err := readProc(pid)
		if err != nil || owner != uid || !argvOK(argv) || pidfdExited(pidfd) {
			pidfd.Close()
			continue
		}
		h := &handle{pid: pid, pidfd: pidfd, adopted: true, done: make(chan struct{})}
		go h.watch()
		hs = append(hs, h)
	}
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() {
			h.terminate(grace)
			h.release()
		})
	}
	wg.Wait()
}

// waitForAddress waits until something accepts connections at addr: a
// host:port, or a unix socket's absolute path.
func waitForAddress(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	network := "tcp"
	if strings.HasPrefix(addr, "/") {
		network = "unix"
	}
	for {
		if c, err := d.DialContext(ctx, network, addr); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
