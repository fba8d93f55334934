package etcdproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Member is one etcd process of a cluster. Its methods are safe for
// concurrent use.
type Member struct {
	Name      string
	Dir       string // data/, etcd.log and etcd.pid live here
	ClientURL string
	PeerURL   string

	cfg  Config
	args []string

	mu   sync.Mutex
	proc *process // nil when not started by us or stopped
}

// process is one run of a member.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // its exit status; read only after done
	// guard is the ExitWithParent watcher; its stdin is the read end of a
	// pipe whose write end only this process holds.
	guard     *exec.Cmd
	guardDone chan struct{}
	guardPipe *os.File
	guardStop sync.Once
}

// DataDir is the member's etcd data directory.
func (m *Member) DataDir() string { return filepath.Join(m.Dir, "data") }

// LogPath is the file the member logs to (appended to across restarts).
func (m *Member) LogPath() string { return filepath.Join(m.Dir, "etcd.log") }

// PIDPath is the file holding the pid of the running member, so that tools
// can find a member that outlived its starter.
func (m *Member) PIDPath() string { return filepath.Join(m.Dir, "etcd.pid") }

// Start restarts a stopped or killed member on its data directory and
// ports, and waits until it reports healthy. In a cluster that lost its
// quorum, the member becomes healthy only once enough members are back.
func (m *Member) Start(ctx context.Context) error {
	if err := m.spawn(); err != nil {
		return err
	}
	return m.WaitReady(ctx)
}

// spawn starts the etcd process without waiting for it.
func (m *Member) spawn() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.proc; p != nil && !p.exited() {
		return fmt.Errorf("etcdproc: member %s is already running (pid %d)", m.Name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(m.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("etcdproc: member %s: %w", m.Name, err)
	}
	defer logf.Close()
	cmd := exec.Command(m.cfg.Binary, m.args...)
	cmd.Dir = m.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdproc: starting member %s: %w", m.Name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	pid := cmd.Process.Pid
	if m.cfg.ExitWithParent {
		if err := p.startGuard(pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("etcdproc: member %s: %w", m.Name, err)
		}
	}
	go func() {
		p.err = cmd.Wait()
		// A guard outliving its member could one day kill a stranger
		// that got the member's process group id.
		p.stopGuard()
		close(p.done)
	}()
	if err := os.WriteFile(m.PIDPath(), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		m.cfg.Logger.Warn("cannot write etcd pid file", "member", m.Name, "err", err)
	}
	m.proc = p
	m.cfg.Logger.Debug("etcd member started", "member", m.Name, "pid", pid, "client", m.ClientURL, "log", m.LogPath())
	return nil
}

// startGuard starts a shell that waits for end of file on its stdin and then
// kills the member's process group. Only this process holds the pipe's
// write end (close-on-exec keeps it out of other children), so the end of
// file comes exactly when this process exits.
func (p *process) startGuard(pid int) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	g := exec.Command("/bin/sh", "-c", `read -r line; kill -KILL "-$1" 2>/dev/null`, "etcd-guard", strconv.Itoa(pid))
	g.Stdin = r
	g.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := g.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting the exit guard: %w", err)
	}
	p.guard, p.guardPipe, p.guardDone = g, w, make(chan struct{})
	go func() {
		_ = g.Wait()
		close(p.guardDone)
	}()
	return nil
}

// stopGuard ends the watcher without letting it fire: before the member is
// stopped on purpose, or once it has exited on its own.
func (p *process) stopGuard() {
	if p.guard == nil {
		return
	}
	p.guardStop.Do(func() {
		_ = p.guard.Process.Kill()
		<-p.guardDone
		p.guardPipe.Close()
	})
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Running reports whether the member's process is alive.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && !m.proc.exited()
}

// PID returns the pid of the running member, or 0.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || m.proc.exited() {
		return 0
	}
	return m.proc.cmd.Process.Pid
}

// Stop sends SIGTERM and waits for the member to exit, sending SIGKILL
// after the stop timeout. Stopping a member that is not running is not an
// error.
func (m *Member) Stop() error { return m.stop(syscall.SIGTERM) }

// Kill sends SIGKILL, as a crash would, and waits for the process to go.
func (m *Member) Kill() error { return m.stop(syscall.SIGKILL) }

func (m *Member) stop(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.proc
	if p == nil {
		return nil
	}
	p.stopGuard()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("etcdproc: signalling member %s: %w", m.Name, err)
	}
	if sig != syscall.SIGKILL {
		t := time.NewTimer(m.cfg.StopTimeout)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			m.cfg.Logger.Warn("etcd member ignored SIGTERM; killing it", "member", m.Name, "timeout", m.cfg.StopTimeout)
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.done
	m.proc = nil
	_ = os.Remove(m.PIDPath())
	m.cfg.Logger.Debug("etcd member stopped", "member", m.Name, "signal", sig.String(), "exit", p.err)
	return nil
}

// WaitReady polls the member's health endpoint until it reports healthy,
// the process exits, ctx ends or the ready timeout passes.
func (m *Member) WaitReady(ctx context.Context) error {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil {
		return fmt.Errorf("etcdproc: member %s is not running", m.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ReadyTimeout)
	defer cancel()
	client, err := m.healthClient()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = m.checkHealth(ctx, client); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("etcdproc: member %s exited while starting (%v); end of %s:\n%s",
				m.Name, p.err, m.LogPath(), m.logTail())
		case <-ctx.Done():
			return fmt.Errorf("etcdproc: member %s not healthy (%v): %w; end of %s:\n%s",
				m.Name, last, ctx.Err(), m.LogPath(), m.logTail())
		case <-tick.C:
		}
	}
}

// healthClient talks to the member's client URL. Under mTLS the member's
// own certificate serves as the client certificate: Corral's certificates
// are valid for both ends of a connection.
func (m *Member) healthClient() (*http.Client, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	if f := m.cfg.ClientTLS; f != nil {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcdproc: client TLS key pair: %w", err)
		}
		caPEM, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcdproc: client TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("etcdproc: no certificate in %s", f.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: pool}
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Second}, nil
}

func (m *Member) checkHealth(ctx context.Context, client *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	return parseHealth(resp.StatusCode, body)
}

// parseHealth interprets an answer of etcd's /health endpoint.
func parseHealth(status int, body []byte) error {
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("health: HTTP %d, unreadable answer %q: %w", status, truncate(body, 200), err)
	}
	if status != http.StatusOK || h.Health != "true" {
		if h.Reason != "" {
			return fmt.Errorf("health: HTTP %d, healthy %q: %s", status, h.Health, h.Reason)
		}
		return fmt.Errorf("health: HTTP %d, healthy %q", status, h.Health)
	}
	return nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// logTail returns the last lines of the member's log, for error messages.
func (m *Member) logTail() string {
	const tailBytes = 2048
	f, err := os.Open(m.LogPath())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := max(0, fi.Size()-tailBytes)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	if off > 0 {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	return strings.TrimRight(string(buf), "\n")
}

// environ is this process's environment without etcd's own variables, which
// etcd would read as flags.
func environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "ETCDCTL_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
