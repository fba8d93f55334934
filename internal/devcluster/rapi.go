package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/bootstrap"
)

// RAPIName is the process name of the dev cluster's corral-rapi.
const RAPIName = "corral-rapi"

// RAPIEnvFile, in the state directory, tells scripts how to reach
// corral-rapi. It holds a password, so only root reads it.
const RAPIEnvFile = "rapi.env"

// RAPIDevUser is the write user Up puts in corral-rapi's users file.
const RAPIDevUser = "dev-admin"

// RAPIEnv is what rapi.env holds.
type RAPIEnv struct {
	URL      string // https://<master address>:<port>
	User     string
	Password string
	CA       string // CA certificate file to verify the server with
}

// The variable names of rapi.env.
const (
	envRAPIURL      = "CORRAL_RAPI_URL"
	envRAPIUser     = "CORRAL_RAPI_USER"
	envRAPIPassword = "CORRAL_RAPI_PASSWORD"
	envRAPICA       = "CORRAL_RAPI_CA"
)

// upRAPI starts corral-rapi as corral-rapi on the master's address and a
// free port, with a new write user, records it and writes rapi.env. It is
// given every master candidate's LUXI socket (one --luxi-socket each, the
// first corrald's first): a forwarding candidate's socket reaches
// whichever is master, so corral-rapi uses the first and follows the role
// through it, and moves on to the next candidate's socket only when the
// one in use cannot be dialed, its corrald gone, without a restart.
func upRAPI(ctx context.Context, o Options, l bootstrap.Layout, st *State, ip string, save func() error) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	env := RAPIEnv{
		URL: "https://" + net.JoinHostPort(ip, strconv.Itoa(port)), User: RAPIDevUser,
		Password: rand.Text(), CA: l.RAPICA(),
	}
	if err := bootstrap.AddRAPIUser(l.RAPIUsers(), env.User, env.Password, "write"); err != nil {
		return err
	}
	cred, err := bootstrap.RAPICredential()
	if err != nil {
		return err
	}
	bmArgs, bm, err := prepareBaremetal(o, l, ip)
	if err != nil {
		return err
	}
	coeArgs, coe, err := prepareCOE(o, l, ip)
	if err != nil {
		return err
	}
	o.Log("Starting corral-rapi as %s on %s", bootstrap.RAPIUser, env.URL)
	args := append([]string{"--bind", ip, "--port", strconv.Itoa(port), "--cert", l.RAPICert(), "--key", l.RAPIKey(),
		"--users", l.RAPIUsers()}, rapiSocketArgs(st, l)...)
	args = append(append(args, bmArgs...), coeArgs...)
	logPath := filepath.Join(o.StateDir, "logs", "corral-rapi.log")
	p, err := start(filepath.Join(o.BinDir, "corral-rapi"), args, logPath, cred, nil)
	if err != nil {
		return err
	}
	p.Name, p.User = RAPIName, bootstrap.RAPIUser
	st.Procs = append(st.Procs, p)
	st.RAPIURL = env.URL
	if bm != nil {
		st.BaremetalURL = bm.Endpoint
	}
	if coe != nil {
		st.COEURL = coe.Endpoint
	}
	if err := save(); err != nil {
		return err
	}
	if err := waitTLS(ctx, env, 30*time.Second); err != nil {
		return fmt.Errorf("corral-rapi did not come up (see %s): %w", logPath, err)
	}
	if bm != nil {
		if err := waitTLS(ctx, RAPIEnv{URL: bm.Endpoint, CA: bm.CACert}, 30*time.Second); err != nil {
			return fmt.Errorf("the Bare Metal API did not come up (see %s): %w", logPath, err)
		}
		o.Log("Bare Metal API on %s (auth %s); for the openstack client: . %s", bm.Endpoint, bm.AuthType,
			filepath.Join(o.StateDir, BaremetalEnvFile))
		if err := WriteBaremetalEnv(filepath.Join(o.StateDir, BaremetalEnvFile), *bm); err != nil {
			return err
		}
	}
	if coe != nil {
		if err := waitTLS(ctx, RAPIEnv{URL: strings.TrimSuffix(coe.Endpoint, "/v1"), CA: coe.CACert}, 30*time.Second); err != nil {
			return fmt.Errorf("the Container Infra API did not come up (see %s): %w", logPath, err)
		}
		o.Log("Container Infra API on %s (auth %s); for the openstack client: . %s", coe.Endpoint, coe.AuthType,
			filepath.Join(o.StateDir, COEEnvFile))
		if err := WriteCOEEnv(filepath.Join(o.StateDir, COEEnvFile), *coe); err != nil {
			return err
		}
	}
	return WriteRAPIEnv(filepath.Join(o.StateDir, RAPIEnvFile), env)
}

// rapiSocketArgs are corral-rapi's --luxi-socket flags: one for each
// master candidate of st, in order, or the layout's socket when st lists
// no corrald yet.
func rapiSocketArgs(st *State, l bootstrap.Layout) []string {
	var args []string
	for _, c := range st.Candidates() {
		args = append(args, "--luxi-socket", c.Socket)
	}
	if len(args) == 0 {
		args = []string{"--luxi-socket", l.Socket()}
	}
	return args
}

// waitTLS waits until the server at env.URL completes a handshake that
// verifies against env.CA.
func waitTLS(ctx context.Context, env RAPIEnv, limit time.Duration) error {
	caPEM, err := os.ReadFile(env.CA)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s", env.CA)
	}
	addr := strings.TrimPrefix(env.URL, "https://")
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for {
		d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WriteRAPIEnv writes env as a shell file to source (mode 0600).
func WriteRAPIEnv(path string, env RAPIEnv) error {
	var b strings.Builder
	for _, kv := range [][2]string{{envRAPIURL, env.URL}, {envRAPIUser, env.User}, {envRAPIPassword, env.Password}, {envRAPICA, env.CA}} {
		// One variable a line keeps the file readable by ReadRAPIEnv.
		if strings.ContainsAny(kv[1], "\x00\r\n") {
			return fmt.Errorf("%s holds a line break or NUL", kv[0])
		}
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	// An older file may have had a laxer mode.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadRAPIEnv reads the rapi.env of a dev cluster's state directory.
func ReadRAPIEnv(stateDir string) (RAPIEnv, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, RAPIEnvFile))
	if err != nil {
		return RAPIEnv{}, err
	}
	return parseRAPIEnv(b)
}

// parseRAPIEnv reads what WriteRAPIEnv writes: "export NAME='value'" lines.
// It is no shell; other lines are errors.
func parseRAPIEnv(data []byte) (RAPIEnv, error) {
	var env RAPIEnv
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, quoted, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			return RAPIEnv{}, fmt.Errorf("line %d: no NAME=value", n)
		}
		value, err := shellUnquote(quoted)
		if err != nil {
			return RAPIEnv{}, fmt.Errorf("line %d: %w", n, err)
		}
		switch name {
		case envRAPIURL:
			env.URL = value
		case envRAPIUser:
			env.User = value
		case envRAPIPassword:
			env.Password = value
		case envRAPICA:
			env.CA = value
		default:
			return RAPIEnv{}, fmt.Errorf("line %d: unknown variable %q", n, name)
		}
	}
	if err := sc.Err(); err != nil {
		return RAPIEnv{}, err
	}
	if env.URL == "" || env.User == "" || env.Password == "" || env.CA == "" {
		return RAPIEnv{}, errors.New("rapi.env lacks one of " + strings.Join([]string{envRAPIURL, envRAPIUser, envRAPIPassword, envRAPICA}, ", "))
	}
	return env, nil
}

// shellQuote quotes s for sh: inside single quotes only the quote itself
// needs care, so each one closes the quotes, adds an escaped quote and
// reopens them.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellUnquote undoes shellQuote: single-quoted runs joined by \'.
func shellUnquote(s string) (string, error) {
	var b strings.Builder
	for s != "" {
		switch {
		case s[0] == '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return "", errors.New("unterminated quote")
			}
			b.WriteString(s[1 : 1+end])
			s = s[2+end:]
		case strings.HasPrefix(s, `\'`):
			b.WriteByte('\'')
			s = s[2:]
		default:
			return "", fmt.Errorf("unquoted text %q", s)
		}
	}
	return b.String(), nil
}
