package agent

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshOutputDrain bounds how long a finished session's output is still
// forwarded: a background process keeping the terminal or the output pipe
// open must not hold the session forever.
const sshOutputDrain = time.Second

// sshPath is the PATH of rescue sessions (busybox's applets).
const sshPath = "/sbin:/bin:/usr/sbin:/usr/bin"

// sshSession is one session channel: its environment, its terminal when
// the client asked for one, and the program once "shell" or "exec" ran.
type sshSession struct {
	r   *RescueSSH
	ch  ssh.Channel
	env []string

	term          string
	cols, rows    uint32
	master, slave *os.File

	cmd    *exec.Cmd
	exited chan uint32
}

// Payloads of the session requests (RFC 4254 section 6).
type (
	ptyRequest struct {
		Term                 string
		Cols, Rows, PxW, PxH uint32
		Modes                string
	}
	windowChange struct{ Cols, Rows, PxW, PxH uint32 }
	envRequest   struct{ Name, Value string }
	execRequest  struct{ Command string }
	exitStatus   struct{ Status uint32 }
)

// serveSession answers a session's requests until its program ends (then
// its exit status is sent) or the client closes the channel (then the
// program is killed).
func (r *RescueSSH) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	s := &sshSession{r: r, ch: ch, exited: make(chan uint32, 1)}
	defer ch.Close()
	defer s.closeTerminal()
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				s.kill()
				return
			}
			ok = s.handle(req)
			if req.WantReply {
				_ = req.Reply(ok, nil)
			}
		case status := <-s.exited:
			_ = ch.CloseWrite()
			_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{status}))
			return
		}
	}
}

func (s *sshSession) handle(req *ssh.Request) bool {
	switch req.Type {
	case "pty-req":
		var p ptyRequest
		if s.cmd != nil || s.master != nil || ssh.Unmarshal(req.Payload, &p) != nil {
			return false
		}
		master, slave, err := openPTY(s.r.DevDir)
		if err != nil {
			s.r.log.Printf("ssh: no terminal: %v", err)
			return false
		}
		s.master, s.slave, s.term = master, slave, p.Term
		if p.Cols > 0 && p.Rows > 0 {
			_ = setWindowSize(master, p.Cols, p.Rows)
		}
		return true
	case "window-change":
		var w windowChange
		if s.master == nil || ssh.Unmarshal(req.Payload, &w) != nil {
			return false
		}
		return setWindowSize(s.master, w.Cols, w.Rows) == nil
	case "env":
		var e envRequest
		if s.cmd != nil || ssh.Unmarshal(req.Payload, &e) != nil || !acceptedEnv(e.Name) ||
			strings.ContainsRune(e.Value, 0) || len(e.Value) > 4096 || len(s.env) >= 32 {
			return false
		}
		s.env = append(s.env, e.Name+"="+e.Value)
		return true
	case "shell":
		if s.cmd != nil {
			return false
		}
		return s.start("") == nil
	case "exec":
		var e execRequest
		if s.cmd != nil || ssh.Unmarshal(req.Payload, &e) != nil {
			return false
		}
		return s.start(e.Command) == nil
	}
	return false // subsystems (sftp), X11, agent forwarding, signals
}

// acceptedEnv is the environment a client may set: locale settings only,
// as OpenSSH's usual AcceptEnv.
func acceptedEnv(name string) bool {
	return name == "LANG" || strings.HasPrefix(name, "LC_") && len(name) < 64 &&
		strings.IndexFunc(name, func(r rune) bool { return !(r == '_' || r >= 'A' && r <= 'Z') }) < 0
}

// start runs the shell: a login shell for "shell", sh -c for "exec".
func (s *sshSession) start(command string) error {
	shell := s.r.Shell
	var cmd *exec.Cmd
	if command == "" {
		cmd = exec.Command(shell, "-l")
	} else {
		cmd = exec.Command(shell, "-c", command)
	}
	cmd.Dir = s.r.Home
	cmd.Env = append([]string{"HOME=" + s.r.Home, "USER=" + RescueUser, "LOGNAME=" + RescueUser,
		"SHELL=" + shell, "PATH=" + sshPath}, s.env...)
	if s.master != nil {
		return s.startOnTerminal(cmd, command)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return s.failed(err)
	}
	cmd.Stdout, cmd.Stderr = s.ch, s.ch.Stderr()
	cmd.WaitDelay = sshOutputDrain
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return s.failed(err)
	}
	s.cmd = cmd
	s.r.log.Printf("ssh: session started (%s, no terminal)", describeCommand(command))
	go func() {
		_, _ = io.Copy(stdin, s.ch)
		stdin.Close()
	}()
	go func() { s.exited <- waitStatus(cmd.Wait()) }()
	return nil
}

func (s *sshSession) startOnTerminal(cmd *exec.Cmd, command string) error {
	term := s.term
	if term == "" {
		term = "vt100"
	}
	cmd.Env = append(cmd.Env, "TERM="+term)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.slave, s.slave, s.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		return s.failed(err)
	}
	s.cmd = cmd
	s.slave.Close()
	s.slave = nil
	s.r.log.Printf("ssh: session started (%s, terminal %q)", describeCommand(command), term)
	master := s.master
	output := make(chan struct{})
	go func() {
		_, _ = io.Copy(s.ch, master)
		close(output)
	}()
	go func() { _, _ = io.Copy(master, s.ch) }()
	go func() {
		status := waitStatus(cmd.Wait())
		// The terminal's last output: read until every holder of the
		// terminal is gone (EIO), but not for ever.
		select {
		case <-output:
		case <-time.After(sshOutputDrain):
		}
		s.exited <- status
	}()
	return nil
}

func (s *sshSession) failed(err error) error {
	s.r.log.Printf("ssh: cannot start %s: %v", s.r.Shell, err)
	return err
}

// describeCommand names a session in the log without its command line,
// which may hold a secret.
func describeCommand(command string) string {
	if command == "" {
		return "shell"
	}
	return "command"
}

func waitStatus(err error) uint32 {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + uint32(ws.Signal())
		}
		if c := ee.ExitCode(); c >= 0 {
			return uint32(c)
		}
	}
	return 255
}

// kill ends the session's program and everything it started in its
// session (the client went away).
func (s *sshSession) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGHUP)
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(2 * sshOutputDrain):
	}
}

func (s *sshSession) closeTerminal() {
	if s.slave != nil {
		s.slave.Close()
	}
	if s.master != nil {
		s.master.Close()
	}
}
