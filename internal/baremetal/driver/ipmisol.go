package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
)

// solReady is what ipmitool prints once the BMC has activated the SOL
// payload; anything before it is ipmitool's own talk.
const solReady = "[SOL Session operational."

// solStartTimeout bounds the wait for the session to come up.
const solStartTimeout = 30 * time.Second

// SOLSession is a running `ipmitool sol activate` on a pseudo-terminal (it
// needs one, as it puts its input in raw mode): Read returns what the
// machine's serial console prints, Write types on it. Close ends ipmitool
// and deactivates the SOL payload on the BMC, so the next session can
// start.
type SOLSession struct {
	d       *IPMI
	pty     *os.File
	cmd     *exec.Cmd
	exited  chan struct{}
	pending []byte // console output read while waiting for solReady

	closeOnce sync.Once
	closeErr  error
}

// OpenSOL starts a Serial-over-LAN session with the BMC (Ironic's
// ipmitool-socat console without the socat: the conductor's node carries
// the stream itself).
func (d *IPMI) OpenSOL(ctx context.Context) (*SOLSession, error) {
	ptmx, tty, err := openPTY()
	if err != nil {
		return nil, err
	}
	args := append(d.baseArgs(), "sol", "activate")
	cmd := exec.Command(solIPMITool, args...)
	cmd.Env = os.Environ()
	if d.password != "" {
		cmd.Env = append(cmd.Env, "IPMI_PASSWORD="+d.password)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		tty.Close()
		return nil, ecode.ExecErrorf("ipmitool sol activate on %s:%d: %w", d.address, d.port, err)
	}
	tty.Close() // ipmitool holds it; the master reads EIO once ipmitool is gone
	s := &SOLSession{d: d, pty: ptmx, cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// solIPMITool is the program run for SOL; tests may point it elsewhere.
var solIPMITool = "ipmitool"

// waitReady reads ipmitool's output until the session is up, keeping its
// announcement (which tells the "~." escape) and any console output that
// followed in the same read for the client.
func (s *SOLSession) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, solStartTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { s.pty.SetReadDeadline(time.Now()) })
	defer stop()
	var seen []byte
	buf := make([]byte, 4096)
	for {
		n, err := s.pty.Read(buf)
		seen = append(seen, buf[:n]...)
		if i := bytes.Index(seen, []byte(solReady)); i >= 0 {
			s.pending = append([]byte(nil), seen[i:]...)
			s.pty.SetReadDeadline(time.Time{})
			return nil
		}
		if err != nil {
			said := redactor{s.d.password}.clean(strings.TrimSpace(string(seen)))
			if ctx.Err() != nil {
				return ecode.ExecErrorf("ipmitool sol activate on %s:%d did not come up within %s: %s",
					s.d.address, s.d.port, solStartTimeout, truncate(said, 300))
			}
			return ecode.ExecErrorf("ipmitool sol activate on %s:%d failed: %s", s.d.address, s.d.port, truncate(said, 300))
		}
	}
}

// Read returns console output; io.EOF once ipmitool has ended (the BMC
// closed the session, or Close).
func (s *SOLSession) Read(p []byte) (int, error) {
	if len(s.pending) > 0 {
		n := copy(p, s.pending)
		s.pending = s.pending[n:]
		return n, nil
	}
	n, err := s.pty.Read(p)
	if err != nil && (errors.Is(err, syscall.EIO) || errors.Is(err, os.ErrClosed)) {
		// A pty master reads EIO when its last slave is closed.
		err = io.EOF
	}
	return n, err
}

// Write sends input to the machine's serial console. ipmitool reads its
// escape "~." after a newline as the end of the session, as on a terminal.
func (s *SOLSession) Write(p []byte) (int, error) { return s.pty.Write(p) }

// Close stops ipmitool and deactivates the SOL payload on the BMC (a
// killed ipmitool leaves it active, and the BMC refuses the next session
// until then). It is safe to call more than once.
func (s *SOLSession) Close() error {
	s.closeOnce.Do(func() {
		if s.cmd.Process != nil {
			s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.exited:
			case <-time.After(2 * time.Second):
				s.cmd.Process.Kill()
				<-s.exited
			}
		}
		s.pty.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.closeErr = s.d.DeactivateSOL(ctx)
	})
	return s.closeErr
}

// DeactivateSOL ends the BMC's active SOL session, if any.
func (d *IPMI) DeactivateSOL(ctx context.Context) error {
	_, err := d.exec(ctx, "sol", "deactivate")
	if err != nil && strings.Contains(err.Error(), "already de-activated") {
		return nil
	}
	return err
}

// openPTY opens a pseudo-terminal pair in raw mode: no echo, no line
// editing, no CR/NL translation, so bytes pass as they are.
func openPTY() (ptmx, tty *os.File, err error) {
	ptmx, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open pseudo-terminal: %w", err)
	}
	var n int
	var ioErr error
	rc, err := ptmx.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) {
			if ioErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioErr != nil {
				return
			}
			n, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		})
	}
	if err == nil {
		err = ioErr
	}
	if err != nil {
		ptmx.Close()
		return nil, nil, fmt.Errorf("unlock pseudo-terminal: %w", err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptmx.Close()
		return nil, nil, fmt.Errorf("open pseudo-terminal /dev/pts/%d: %w", n, err)
	}
	if err := makeRaw(tty); err != nil {
		ptmx.Close()
		tty.Close()
		return nil, nil, err
	}
	return ptmx, tty, nil
}

func makeRaw(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("pseudo-terminal mode: %w", err)
	}
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		var t *unix.Termios
		if t, ioErr = unix.IoctlGetTermios(int(fd), unix.TCGETS); ioErr != nil {
			return
		}
		t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Cflag &^= unix.CSIZE | unix.PARENB
		t.Cflag |= unix.CS8
		t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
		ioErr = unix.IoctlSetTermios(int(fd), unix.TCSETS, t)
	})
	if err == nil {
		err = ioErr
	}
	if err != nil {
		return fmt.Errorf("pseudo-terminal raw mode: %w", err)
	}
	return nil
}
