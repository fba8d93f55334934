package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// transfer moves the file src to a new file dst over loopback. setup
// runs before the clock starts (listening sockets, listener processes);
// the returned function is the timed part and must return only when dst
// is complete.
type transfer func(ctx context.Context, src, dst string) (timed func() error, cleanup func(), err error)

// env is what every transfer shares: the two ends' identities.
type env struct {
	recv, send *endpoint
}

// rawTLS is the baseline: Go's crypto/tls, TLS 1.3 only, mutual
// authentication against the pinned peer certificates, and a plain
// io.Copy at each end.
func (e *env) rawTLS(ctx context.Context, src, dst string) (func() error, func(), error) {
	srvCfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{e.recv.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    e.send.pool(),
	}
	cliCfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{e.send.cert},
		RootCAs:      e.recv.pool(),
		ServerName:   e.recv.name,
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { ln.Close() }
	timed := func() error {
		recvErr := make(chan error, 1)
		go func() { recvErr <- receiveFile(ln, dst) }()
		sendErr := sendFile(ctx, cliCfg, ln.Addr().String(), src)
		if sendErr != nil {
			// Unblock a receiver still waiting for its connection.
			ln.Close()
		}
		return errors.Join(sendErr, <-recvErr)
	}
	return timed, cleanup, nil
}

func receiveFile(ln net.Listener, dst string) error {
	c, err := ln.Accept()
	if err != nil {
		return fmt.Errorf("accepting: %w", err)
	}
	defer c.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, c); err != nil {
		f.Close()
		return fmt.Errorf("receiving: %w", err)
	}
	return f.Close()
}

func sendFile(ctx context.Context, cfg *tls.Config, addr, src string) error {
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dialing: %w", err)
	}
	f, err := os.Open(src)
	if err != nil {
		c.Close()
		return err
	}
	defer f.Close()
	if _, err := io.Copy(c, f); err != nil {
		c.Close()
		return fmt.Errorf("sending: %w", err)
	}
	// Close sends TLS close_notify: the receiver's io.Copy ends cleanly.
	return c.Close()
}

// socatCiphers and socatBuffer are the settings Ganeti's import-export
// daemon gives socat.
const (
	socatCiphers = "HIGH:-DES:-3DES:-EXPORT:-DH"
	socatBuffer  = "1048576"
)

// socat is Ganeti's transport: an OPENSSL-LISTEN socat writing the file,
// an OPENSSL socat reading it, each end verifying the other against the
// peer's certificate as its only CA. With a compressor ("gzip" or "zstd")
// both ends become shell pipelines with the tool at fast settings.
func (e *env) socat(compressor string) transfer {
	return func(ctx context.Context, src, dst string) (func() error, func(), error) {
		listen := fmt.Sprintf("OPENSSL-LISTEN:0,bind=127.0.0.1,reuseaddr,cert=%s,cafile=%s,verify=1,cipher=%s",
			e.recv.pemPath, e.send.certPath, socatCiphers)
		recvCmd := fmt.Sprintf("exec socat -d -d -u -b %s %s STDOUT > %s", socatBuffer, shq(listen), shq(dst))
		if compressor != "" {
			recvCmd = fmt.Sprintf("socat -d -d -u -b %s %s STDOUT | %s -d -c > %s",
				socatBuffer, shq(listen), compressor, shq(dst))
		}
		recv := newShell(ctx, recvCmd)
		notices := newNoticeWatcher()
		recv.Stderr = notices
		if err := recv.Start(); err != nil {
			return nil, nil, fmt.Errorf("starting the receiving socat: %w", err)
		}
		var recvErr error
		recvDone := make(chan struct{})
		go func() { recvErr = recv.Wait(); close(recvDone) }()
		cleanup := func() {
			select {
			case <-recvDone:
			default:
				_ = recv.Cancel()
				<-recvDone
			}
		}
		var p int
		select {
		case p = <-notices.port:
		case <-recvDone:
		case <-time.After(10 * time.Second):
		}
		if p == 0 {
			cleanup()
			return nil, nil, fmt.Errorf("the receiving socat did not listen: %v: %s", recvErr, notices)
		}
		connect := fmt.Sprintf("OPENSSL:127.0.0.1:%d,cert=%s,cafile=%s,verify=1,cn=%s,cipher=%s",
			p, e.send.pemPath, e.recv.certPath, e.recv.name, socatCiphers)
		sendCmd := fmt.Sprintf("exec socat -u -b %s STDIN %s < %s", socatBuffer, shq(connect), shq(src))
		if compressor != "" {
			sendCmd = fmt.Sprintf("%s -1 -c < %s | socat -u -b %s STDIN %s",
				compressor, shq(src), socatBuffer, shq(connect))
		}
		timed := func() error {
			send := newShell(ctx, sendCmd)
			var sendLog bytes.Buffer
			send.Stderr = &sendLog
			if err := send.Run(); err != nil {
				cleanup()
				return fmt.Errorf("sending socat: %w: %s", err, strings.TrimSpace(sendLog.String()))
			}
			<-recvDone
			if recvErr != nil {
				return fmt.Errorf("receiving socat: %w: %s", recvErr, notices)
			}
			return nil
		}
		return timed, cleanup, nil
	}
}

// newShell runs script under bash with pipefail, in its own process group
// so that cancelling ends the whole pipeline.
func newShell(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-o", "errexit", "-o", "pipefail", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

var listenRE = regexp.MustCompile(`listening on .*:(\d+)\s*$`)

// noticeWatcher is the receiving end's stderr: it sends the port of
// socat's -d -d "listening on" notice once and keeps the last lines for
// error messages.
type noticeWatcher struct {
	port  chan int
	mu    sync.Mutex
	sent  bool
	part  []byte
	lines []string
}

func newNoticeWatcher() *noticeWatcher { return &noticeWatcher{port: make(chan int, 1)} }

func (w *noticeWatcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, b...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(w.part[:i])
		w.part = w.part[i+1:]
		w.lines = append(w.lines, line)
		if len(w.lines) > 30 {
			w.lines = w.lines[1:]
		}
		if m := listenRE.FindStringSubmatch(line); m != nil && !w.sent {
			p, _ := strconv.Atoi(m[1])
			w.port <- p
			w.sent = true
		}
	}
}

func (w *noticeWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(append(w.lines, string(w.part)), " | ")
}

// shq quotes s for bash.
func shq(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
