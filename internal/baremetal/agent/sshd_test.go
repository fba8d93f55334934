package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/cryptpw"
)

const sshTestPassword = "Rescue-ssh-pw-9"

// newSSHKey makes an ed25519 client key and its authorized_keys line.
func newSSHKey(t *testing.T) (ssh.Signer, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	spub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return signer, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(spub))) + " tester@host"
}

// rescueSSH is a rescued test machine (password sshTestPassword, one key)
// with its SSH server on a loopback port.
type rescueSSH struct {
	tm   *testMachine
	srv  *RescueSSH
	addr string
	key  ssh.Signer
}

func startRescueSSH(t *testing.T) *rescueSSH {
	t.Helper()
	tm := newTestMachine(t)
	tm.DevDir = "/dev" // the real pseudo-terminals
	hash, err := cryptpw.Hash(cryptpw.SHA256, sshTestPassword)
	if err != nil {
		t.Fatal(err)
	}
	key, line := newSSHKey(t)
	if err := tm.enableRescueUser(hash, []string{line}); err != nil {
		t.Fatal(err)
	}
	srv, err := NewRescueSSH(tm.Machine, log.New(tm.console, "corral-agent: ", 0))
	if err != nil {
		t.Fatal(err)
	}
	srv.PasswordFailWait = 10 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not end")
		}
		if c := tm.console.String(); strings.Contains(c, sshTestPassword) || strings.Contains(c, hash) {
			t.Errorf("the console shows the password or its hash:\n%s", c)
		}
	})
	return &rescueSSH{tm: tm, srv: srv, addr: ln.Addr().String(), key: key}
}

func (r *rescueSSH) dial(user string, auth ...ssh.AuthMethod) (*ssh.Client, error) {
	return ssh.Dial("tcp", r.addr, &ssh.ClientConfig{User: user, Auth: auth,
		HostKeyCallback: ssh.FixedHostKey(r.srv.HostKey()), Timeout: 10 * time.Second})
}

func runOn(t *testing.T, c *ssh.Client, cmd string) string {
	t.Helper()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("%q: %v\n%s", cmd, err, out)
	}
	return string(out)
}

func TestRescueSSHLogins(t *testing.T) {
	r := startRescueSSH(t)
	otherKey, _ := newSSHKey(t)
	want := fmt.Sprintf("%d\nSSH-OK\n", os.Getuid())
	for _, tc := range []struct {
		name string
		user string
		auth ssh.AuthMethod
		ok   bool
	}{
		{"the authorized key", RescueUser, ssh.PublicKeys(r.key), true},
		{"the password", RescueUser, ssh.Password(sshTestPassword), true},
		{"another key", RescueUser, ssh.PublicKeys(otherKey), false},
		{"a wrong password", RescueUser, ssh.Password("not-" + sshTestPassword), false},
		{"root with the password", "root", ssh.Password(sshTestPassword), false},
		{"root with the key", "root", ssh.PublicKeys(r.key), false},
		{"another user with the key", "rescue2", ssh.PublicKeys(r.key), false},
		{"an empty password", RescueUser, ssh.Password(""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := r.dial(tc.user, tc.auth)
			if !tc.ok {
				if err == nil {
					c.Close()
					t.Fatalf("%s logged in", tc.name)
				}
				if !strings.Contains(err.Error(), "unable to authenticate") {
					t.Fatalf("refusal: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("login: %v", err)
			}
			defer c.Close()
			if got := runOn(t, c, "id -u; echo SSH-OK"); got != want {
				t.Fatalf("output %q, want %q", got, want)
			}
		})
	}
	if c := r.tm.console.String(); !strings.Contains(c, "logged in with public key ssh-ed25519 SHA256:") ||
		!strings.Contains(c, "logged in with password") || !strings.Contains(c, "no login") {
		t.Fatalf("the console does not tell the logins:\n%s", c)
	}
}

// TestRescueSSHLockedOrMissingUser: a rescue user without a password hash
// or keys cannot log in, whatever it sends.
func TestRescueSSHLockedOrMissingUser(t *testing.T) {
	r := startRescueSSH(t)
	if err := replaceUserLine(r.tm.EtcDir+"/shadow", "rescue:!:1:0:99999:7:::", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.tm.RescueHome + "/.ssh/authorized_keys"); err != nil {
		t.Fatal(err)
	}
	for _, auth := range []ssh.AuthMethod{ssh.Password(sshTestPassword), ssh.Password("!"), ssh.PublicKeys(r.key)} {
		if c, err := r.dial(RescueUser, auth); err == nil {
			c.Close()
			t.Fatal("a locked rescue user logged in")
		}
	}
}

func TestRescueSSHSessions(t *testing.T) {
	r := startRescueSSH(t)
	c, err := r.dial(RescueUser, ssh.PublicKeys(r.key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	t.Run("exit status and stderr", func(t *testing.T) {
		sess, _ := c.NewSession()
		defer sess.Close()
		var stdout, stderr bytes.Buffer
		sess.Stdout, sess.Stderr = &stdout, &stderr
		err := sess.Run("echo out; echo err >&2; exit 3")
		var ee *ssh.ExitError
		if !errors.As(err, &ee) || ee.ExitStatus() != 3 || stdout.String() != "out\n" || stderr.String() != "err\n" {
			t.Fatalf("err %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
		}
	})
	t.Run("stdin and environment", func(t *testing.T) {
		sess, _ := c.NewSession()
		defer sess.Close()
		if err := sess.Setenv("LC_CORRAL", "yes"); err != nil {
			t.Fatalf("LC_ variable refused: %v", err)
		}
		if err := sess.Setenv("LD_PRELOAD", "/tmp/x.so"); err == nil {
			t.Fatal("LD_PRELOAD accepted")
		}
		sess.Stdin = strings.NewReader("from-stdin\n")
		out, err := sess.Output(`read l; echo "$l $LC_CORRAL $USER $HOME ${LD_PRELOAD:-none}"`)
		if err != nil || string(out) != "from-stdin yes rescue "+r.tm.RescueHome+" none\n" {
			t.Fatalf("%q %v", out, err)
		}
	})
	t.Run("terminal", func(t *testing.T) {
		sess, _ := c.NewSession()
		defer sess.Close()
		if err := sess.RequestPty("xterm", 40, 100, ssh.TerminalModes{}); err != nil {
			t.Fatalf("pty-req: %v", err)
		}
		in, _ := sess.StdinPipe()
		var out bmctest.SyncBuffer
		sess.Stdout = &out
		if err := sess.Shell(); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(in, "echo TTY-$((6*7)) $TERM $(stty size) $(tty)\n")
		waitOutput(t, &out, "TTY-42 xterm 40 100 /dev/pts/")
		if err := sess.WindowChange(50, 132); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(in, `i=0; while [ "$(stty size)" != "50 132" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; echo RE$((0))SIZED $(stty size); exit 5`+"\n")
		waitOutput(t, &out, "RE0SIZED 50 132")
		var ee *ssh.ExitError
		if err := sess.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 5 {
			t.Fatalf("shell end: %v", err)
		}
	})
	t.Run("no forwarding or subsystems", func(t *testing.T) {
		if conn, err := c.Dial("tcp", r.addr); err == nil {
			conn.Close()
			t.Fatal("a direct-tcpip channel was opened")
		}
		sess, _ := c.NewSession()
		defer sess.Close()
		if err := sess.RequestSubsystem("sftp"); err == nil {
			t.Fatal("the sftp subsystem was accepted")
		}
	})
}

func waitOutput(t *testing.T, out *bmctest.SyncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%q not in the output:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRescueSSHConnectionLimit: connections beyond sshMaxConns are closed
// before the SSH handshake, and a slot frees when a connection ends.
func TestRescueSSHConnectionLimit(t *testing.T) {
	r := startRescueSSH(t)
	banner := func(c net.Conn) string {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 64)
		n, _ := c.Read(b)
		return string(b[:n])
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range sshMaxConns {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if b := banner(c); !strings.HasPrefix(b, "SSH-2.0-corral-agent") {
			t.Fatalf("banner %q", b)
		}
	}
	extra, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	if b := banner(extra); b != "" {
		t.Fatalf("connection %d was served: %q", sshMaxConns+1, b)
	}
	extra.Close()
	held[0].Close()
	held = held[1:]
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := r.dial(RescueUser, ssh.PublicKeys(r.key))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no login after a slot freed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(r.tm.console.String(), "refused, already 8 connections") {
		t.Fatalf("the console does not tell the refusal:\n%s", r.tm.console)
	}
}

// TestRescueSSHKillsSessionOnDisconnect: a client that goes away takes its
// session's processes with it.
func TestRescueSSHKillsSessionOnDisconnect(t *testing.T) {
	r := startRescueSSH(t)
	c, err := r.dial(RescueUser, ssh.Password(sshTestPassword))
	if err != nil {
		t.Fatal(err)
	}
	sess, _ := c.NewSession()
	var out bmctest.SyncBuffer
	sess.Stdout = &out
	if err := sess.Start(`sleep 60 & echo PIDS $$ $!; wait`); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, &out, "\n")
	var shell, child int
	if _, err := fmt.Sscanf(out.String(), "PIDS %d %d", &shell, &child); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range []int{shell, child} {
		for {
			// Gone, or a zombie of a parent not yet reaped.
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil || strings.Contains(string(stat), ") Z ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d still runs after the client left", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
