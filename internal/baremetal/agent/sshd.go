package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corral/corral/internal/cryptpw"
)

// Limits of the rescue SSH server. A rescued machine is on its tenant
// network, where anyone may knock: few connections at once, few attempts
// per connection, a pause after each wrong password, and a bounded
// handshake.
const (
	sshMaxConns         = 8
	sshMaxSessions      = 4
	sshMaxAuthTries     = 6
	sshHandshakeTimeout = 30 * time.Second
	sshPasswordFailWait = time.Second
)

// errSSHRefused is every refusal the client sees: it does not tell a wrong
// user from a wrong password or key.
var errSSHRefused = errors.New("access denied")

// RescueSSH is the SSH server of a rescued machine: the rescue user logs in
// with a key of its authorized_keys or its password (checked against the
// crypt hash finalize_rescue wrote to shadow) and gets a shell as uid 0.
// No other user name is accepted, and nothing but sessions (shell, exec)
// is served: no forwarding, no subsystems.
type RescueSSH struct {
	// EtcDir holds shadow; Home holds .ssh/authorized_keys. Both are read
	// at every login, so a later finalize_rescue takes effect at once.
	EtcDir, Home string
	// Shell runs the sessions (/bin/sh); DevDir is where ptmx and pts are.
	Shell, DevDir string
	// PasswordFailWait is the pause after a wrong password.
	PasswordFailWait time.Duration

	hostKey ssh.Signer
	log     *log.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// NewRescueSSH makes the rescue SSH server of m with a host key generated
// now (ed25519): every boot has its own.
func NewRescueSSH(m *Machine, logger *log.Logger) (*RescueSSH, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	shell := m.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	return &RescueSSH{EtcDir: m.EtcDir, Home: m.RescueHome, Shell: shell, DevDir: m.DevDir,
		PasswordFailWait: sshPasswordFailWait, hostKey: signer, log: logger,
		conns: map[net.Conn]struct{}{}}, nil
}

// HostKey is the server's public host key.
func (r *RescueSSH) HostKey() ssh.PublicKey { return r.hostKey.PublicKey() }

// Fingerprint is the host key's fingerprint as ssh shows it
// ("SHA256:...").
func (r *RescueSSH) Fingerprint() string { return ssh.FingerprintSHA256(r.hostKey.PublicKey()) }

func (r *RescueSSH) config() *ssh.ServerConfig {
	c := &ssh.ServerConfig{
		MaxAuthTries:      sshMaxAuthTries,
		PublicKeyCallback: r.checkKey,
		PasswordCallback:  r.checkPassword,
		ServerVersion:     "SSH-2.0-corral-agent",
	}
	c.AddHostKey(r.hostKey)
	return c
}

// checkKey accepts a key listed in the rescue user's authorized_keys.
func (r *RescueSSH) checkKey(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	if meta.User() != RescueUser {
		return nil, errSSHRefused
	}
	data, err := os.ReadFile(filepath.Join(r.Home, ".ssh", "authorized_keys"))
	if err != nil {
		return nil, errSSHRefused
	}
	want := key.Marshal()
	for len(bytes.TrimSpace(data)) > 0 {
		k, _, _, rest, err := ssh.ParseAuthorizedKey(data)
		if err != nil {
			break
		}
		if bytes.Equal(k.Marshal(), want) {
			return &ssh.Permissions{Extensions: map[string]string{
				"login": "public key " + key.Type() + " " + ssh.FingerprintSHA256(key)}}, nil
		}
		data = rest
	}
	return nil, errSSHRefused
}

// checkPassword checks the password against the rescue user's shadow
// hash. Other user names cost the same hashing, so timing does not tell
// them apart.
func (r *RescueSSH) checkPassword(meta ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
	hash := ""
	if meta.User() == RescueUser {
		hash = r.rescueHash()
	}
	ok := false
	if hash != "" {
		ok = cryptpw.Verify(hash, string(password))
	} else {
		_, _ = cryptpw.Crypt(string(password), "$5$corral.nouser$")
	}
	if !ok {
		time.Sleep(r.PasswordFailWait)
		return nil, errSSHRefused
	}
	return &ssh.Permissions{Extensions: map[string]string{"login": "password"}}, nil
}

// rescueHash is the rescue user's crypt hash from shadow, "" when it has
// none or is locked.
func (r *RescueSSH) rescueHash() string {
	f, err := os.Open(filepath.Join(r.EtcDir, "shadow"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 2 || fields[0] != RescueUser {
			continue
		}
		h := fields[1]
		if !strings.HasPrefix(h, "$") {
			return "" // "", "*", "!...": no password login
		}
		return h
	}
	return ""
}

// Serve accepts connections on ln until ctx ends; then it closes ln and
// every connection.
func (r *RescueSSH) Serve(ctx context.Context, ln net.Listener) error {
	cfg := r.config()
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		r.mu.Lock()
		for c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
	})
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, sshMaxConns)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			r.log.Printf("ssh: accept: %v", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			r.log.Printf("ssh: %s: refused, already %d connections", c.RemoteAddr(), sshMaxConns)
			c.Close()
			continue
		}
		if !r.track(c, ctx) {
			<-slots
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer r.untrack(c)
			r.serveConn(c, cfg)
		}()
	}
}

// track records a connection so Serve's end closes it; it refuses (and
// closes) one accepted while ctx ended.
func (r *RescueSSH) track(c net.Conn, ctx context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() != nil {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *RescueSSH) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

// serveConn runs one client's connection: handshake and login within
// sshHandshakeTimeout, then its session channels.
func (r *RescueSSH) serveConn(c net.Conn, cfg *ssh.ServerConfig) {
	from := c.RemoteAddr().String()
	_ = c.SetDeadline(time.Now().Add(sshHandshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		r.log.Printf("ssh: %s: no login: %v", from, err)
		return
	}
	defer sc.Close()
	_ = c.SetDeadline(time.Time{})
	r.log.Printf("ssh: %s: %s logged in with %s", from, RescueUser, sc.Permissions.Extensions["login"])
	go ssh.DiscardRequests(reqs)
	sessions := make(chan struct{}, sshMaxSessions)
	var wg sync.WaitGroup
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.Prohibited, "only sessions are served")
			continue
		}
		select {
		case sessions <- struct{}{}:
		default:
			_ = nc.Reject(ssh.ResourceShortage, fmt.Sprintf("at most %d sessions per connection", sshMaxSessions))
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			<-sessions
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sessions }()
			r.serveSession(ch, creqs)
		}()
	}
	wg.Wait()
	r.log.Printf("ssh: %s: connection closed", from)
}
