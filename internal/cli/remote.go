package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/rapiclient"
	"github.com/corral/corral/internal/secret"
)

// Environment variables of remote mode: the names the dev cluster's
// rapi.env exports, so `. rapi.env; corral ...` works.
const (
	EnvRAPIURL      = "CORRAL_RAPI_URL"
	EnvRAPIUser     = "CORRAL_RAPI_USER"
	EnvRAPIPassword = "CORRAL_RAPI_PASSWORD"
	EnvRAPICA       = "CORRAL_RAPI_CA"
)

// remoteHelp goes into the root command's long help.
const remoteHelp = `

Remote mode: with --rapi URL the commands talk to a cluster's RAPI server
(corral-rapi) over HTTPS instead of the local socket, verifying the server
with --rapi-ca only and logging in as --rapi-user with the password read
from --rapi-password-file. Without --rapi, the environment decides: remote
when ` + EnvRAPIURL + ` is set, unless --socket or ` + EnvSocket + ` asks for a
socket; ` + EnvRAPIUser + `, ` + EnvRAPIPassword + ` and ` + EnvRAPICA + ` stand in
for the other flags. Everyday commands work remotely: lists and info, instance
add/remove/startup/shutdown/reboot/reinstall/rename/modify and its disks, node
modify, group commands, tags and jobs; the others say so and must run on the
master.`

// remoteFlags are the remote-mode flags as parsed.
type remoteFlags struct {
	url, user, passwordFile, ca string
}

func addRemoteFlags(fs *pflag.FlagSet) *remoteFlags {
	rf := &remoteFlags{}
	fs.StringVar(&rf.url, "rapi", "", "manage the cluster through its RAPI server at this https:// URL (env "+EnvRAPIURL+", unless a socket is given)")
	fs.StringVar(&rf.user, "rapi-user", "", "RAPI user name (env "+EnvRAPIUser+")")
	fs.StringVar(&rf.passwordFile, "rapi-password-file", "", "file whose first line is the RAPI user's password (env "+EnvRAPIPassword+" holds the password itself)")
	fs.StringVar(&rf.ca, "rapi-ca", "", "CA certificate (PEM) that signed the RAPI server's certificate; no other is trusted (env "+EnvRAPICA+")")
	return rf
}

// remote is the resolved remote-mode setting.
type remote struct {
	url, user, passwordFile, ca string
	password                    secret.Secret // from the environment
}

// selectDial picks local or remote mode once flags are parsed and points
// Dial (and Console) at it; local mode keeps the values preset in Env.
func (e *Env) selectDial(fs *pflag.FlagSet, rf *remoteFlags, presetDial func(context.Context) (*luxi.Client, error),
	presetConsole func(context.Context, string, io.Reader, io.Writer) error) {
	e.Dial, e.Console = presetDial, presetConsole
	changed := func(name string) bool { f := fs.Lookup(name); return f != nil && f.Changed }
	r := &remote{url: rf.url}
	switch {
	case changed("rapi") && changed("socket"):
		e.Dial = func(context.Context) (*luxi.Client, error) {
			return nil, usagef("--rapi and --socket exclude each other")
		}
		return
	case changed("rapi"):
	case changed("socket") || e.getenv(EnvSocket) != "":
		return
	default:
		r.url = e.getenv(EnvRAPIURL)
	}
	if r.url == "" {
		return
	}
	pick := func(flag, val, envVar string) string {
		if changed(flag) {
			return val
		}
		return e.getenv(envVar)
	}
	r.user = pick("rapi-user", rf.user, EnvRAPIUser)
	r.ca = pick("rapi-ca", rf.ca, EnvRAPICA)
	r.passwordFile = rf.passwordFile
	if !changed("rapi-password-file") {
		r.password = secret.Secret(e.getenv(EnvRAPIPassword))
	}
	e.Dial = r.dial
	e.Console = func(context.Context, string, io.Reader, io.Writer) error {
		return ecode.Errorf(ecode.Environ, "the serial console is not available over RAPI; run it on the master")
	}
}

// dial builds the RAPI client and checks, with one request, that the
// server is reachable, trusted and accepts the credentials, so that a
// mistake there is reported as such before any command runs.
func (r *remote) dial(ctx context.Context) (*luxi.Client, error) {
	cfg, err := r.config()
	if err != nil {
		return nil, &exitError{code: ExitUsage, msg: "Failure: " + err.Error()}
	}
	c, err := rapiclient.New(cfg)
	if err != nil {
		return nil, &exitError{code: ExitUsage, msg: "Failure: " + err.Error()}
	}
	var version any
	if err := c.Do(ctx, http.MethodGet, "/version", nil, nil, &version); err != nil {
		c.Close()
		return nil, r.dialError(err)
	}
	return luxi.NewCallClient(c.Call, c.Close), nil
}

func (r *remote) config() (rapiclient.Config, error) {
	cfg := rapiclient.Config{URL: r.url, User: r.user, Password: r.password}
	if r.passwordFile != "" {
		b, err := os.ReadFile(r.passwordFile)
		if err != nil {
			return cfg, fmt.Errorf("reading the RAPI password: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		cfg.Password = secret.Secret(strings.TrimSuffix(line, "\r"))
	}
	if cfg.User != "" && cfg.Password.Empty() {
		return cfg, fmt.Errorf("no password for RAPI user %q: give --rapi-password-file or set %s", cfg.User, EnvRAPIPassword)
	}
	if r.ca == "" {
		return cfg, fmt.Errorf("no CA certificate to verify the RAPI server at %s: give --rapi-ca or set %s", r.url, EnvRAPICA)
	}
	pem, err := os.ReadFile(r.ca)
	if err != nil {
		return cfg, fmt.Errorf("reading the RAPI CA certificate: %w", err)
	}
	cfg.CAPEM = pem
	return cfg, nil
}

// dialError reports a failed first contact with the exit status of its
// class: an unreachable or untrusted server and refused credentials are
// environment problems.
func (r *remote) dialError(err error) error {
	var te *rapiclient.TransportError
	if errors.As(err, &te) {
		return &exitError{code: ecode.ExitCode(ecode.Environ),
			msg: fmt.Sprintf("Cannot communicate with the RAPI server at %s (%v).\nCheck --rapi, --rapi-ca and that corral-rapi is running.", te.URL, te.Err)}
	}
	msg, code := FormatError(err)
	return &exitError{code: code, msg: msg}
}
