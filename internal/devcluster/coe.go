package devcluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/crypto/bcrypt"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/luxi"
)

// COEEnvFile, in the state directory, is what `openstack coe` needs to
// drive the dev cluster's Container Infra API: `. coe.env; openstack coe
// cluster list`. It holds a password, so only root reads it.
const COEEnvFile = "coe.env"

// COEDevUser is the user Up puts in the Container Infra API's users file,
// an administrator of project COEDevProject.
const (
	COEDevUser    = "admin"
	COEDevProject = "admin"
)

// DefaultCOEPort is Magnum's port, what `corral dev up` asks for.
const DefaultCOEPort = 9511

// Container Infra API authentication strategies of Options.COEAuth (the
// Bare Metal API's names).
const (
	COEHTTPBasic = BaremetalHTTPBasic
	COENoAuth    = BaremetalNoAuth
	COEOff       = BaremetalOff
)

// coeShellLine sets SHELL when unset: `openstack coe cluster config`
// reads it to choose the syntax it prints and fails without it.
const coeShellLine = `: "${SHELL:=/bin/sh}"; export SHELL`

// COEEnv is what coe.env holds: the openstack client's variables for an
// endpoint without Keystone. Magnum's endpoint ends in /v1.
type COEEnv struct {
	AuthType string // http_basic or none
	Endpoint string // https://<master address>:<port>/v1
	Username string // http_basic only
	Password string
	CACert   string
}

// Vars are the environment variables, in file order.
func (e COEEnv) Vars() [][2]string {
	vars := [][2]string{{"OS_AUTH_TYPE", e.AuthType}, {"OS_ENDPOINT", e.Endpoint}}
	if e.AuthType == COEHTTPBasic {
		vars = append(vars, [2]string{"OS_USERNAME", e.Username}, [2]string{"OS_PASSWORD", e.Password})
	}
	return append(vars, [2]string{"OS_CACERT", e.CACert}, [2]string{"REQUESTS_CA_BUNDLE", e.CACert})
}

// freePortOr picks a port on ip: want, or, when that is 0 or the default
// is taken, a free one.
func freePortOr(o Options, ip string, want, def int, what string) (int, error) {
	try := func(port int) (int, error) {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return 0, err
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port, nil
	}
	port, err := try(want)
	if err != nil && want == def && errors.Is(err, syscall.EADDRINUSE) {
		o.Log("Port %d is taken; the %s gets a free port", def, what)
		return try(0)
	}
	return port, err
}

// prepareCOE makes corral-rapi's Container Infra API flags: its listener
// on ip with the RAPI certificate, and for http_basic a users file with a
// new password for COEDevUser (an administrator of COEDevProject),
// readable only by the owner of the RAPI users file (corral-rapi). It
// returns no flags when the API is off.
func prepareCOE(o Options, l bootstrap.Layout, ip string) ([]string, *COEEnv, error) {
	if o.COEAuth == COEOff {
		return nil, nil, nil
	}
	port, err := freePortOr(o, ip, o.COEPort, DefaultCOEPort, "Container Infra API")
	if err != nil {
		return nil, nil, fmt.Errorf("Container Infra API port: %w", err)
	}
	env := &COEEnv{AuthType: "none", Endpoint: "https://" + net.JoinHostPort(ip, strconv.Itoa(port)) + "/v1", CACert: l.RAPICA()}
	args := []string{"--coe-bind", ip, "--coe-port", strconv.Itoa(port), "--coe-cert", l.RAPICert(), "--coe-key", l.RAPIKey()}
	if o.COEAuth == COENoAuth {
		return append(args, "--coe-auth", COENoAuth, "--coe-noauth-project", COEDevProject), env, nil
	}
	env.AuthType, env.Username, env.Password = COEHTTPBasic, COEDevUser, rand.Text()
	hash, err := bcrypt.GenerateFromPassword([]byte(env.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, nil, err
	}
	file := filepath.Join(filepath.Dir(l.RAPIUsers()), "coe.users")
	line := env.Username + ":" + string(hash) + ":" + COEDevProject + ":admin\n"
	if err := writeOwnedLike(file, line, l.RAPIUsers()); err != nil {
		return nil, nil, err
	}
	return append(args, "--coe-auth", COEHTTPBasic, "--coe-users", file), env, nil
}

// writeOwnedLike writes a private file owned as ref is (when ref exists).
func writeOwnedLike(path, content, ref string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if fi, err := os.Stat(ref); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return os.Chown(path, int(st.Uid), int(st.Gid))
		}
	}
	return nil
}

// WriteCOEEnv writes env as a shell file to source (mode 0600), with the
// SHELL default `openstack coe cluster config` needs.
func WriteCOEEnv(path string, env COEEnv) error {
	var b strings.Builder
	b.WriteString("# openstack coe: . this file, then e.g. `openstack coe cluster list`.\n")
	b.WriteString("# `openstack coe cluster config` fails when SHELL is unset: the next line sets it.\n")
	b.WriteString(coeShellLine + "\n")
	for _, kv := range env.Vars() {
		if strings.ContainsAny(kv[1], "\x00\r\n") {
			return fmt.Errorf("%s holds a line break or NUL", kv[0])
		}
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return writePrivate(path, b.String())
}

// ReadCOEEnv reads the coe.env of a dev cluster's state directory as
// NAME=value entries, for a child process's environment (SHELL is the
// caller's business).
func ReadCOEEnv(stateDir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, COEEnvFile))
	if err != nil {
		return nil, err
	}
	var out []string
	for n, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || line == coeShellLine {
			continue
		}
		name, quoted, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			return nil, fmt.Errorf("%s line %d: no NAME=value", COEEnvFile, n+1)
		}
		v, err := shellUnquote(quoted)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", COEEnvFile, n+1, err)
		}
		out = append(out, name+"="+v)
	}
	return out, nil
}

// COEDevTemplate is the cluster template Up makes when the Kubernetes
// tools (`make k8s-tools`) are there: the k8s_process driver with kwok
// workers, public, so `openstack coe cluster create c1
// --cluster-template kwok-small` works at once.
const COEDevTemplate = "kwok-small"

// upCOETemplate makes COEDevTemplate through the template create job.
func upCOETemplate(ctx context.Context, o Options, c *luxi.Client) error {
	if o.COEAuth == COEOff {
		return nil
	}
	if _, err := k8sbin.Locate(k8sbin.Dir("")); err != nil {
		o.Log("No COE cluster template: %v", err)
		return nil
	}
	op := map[string]any{"OP_ID": "OP_COE_TEMPLATE_CREATE", "name": COEDevTemplate, "project_id": COEDevProject, "user_id": COEDevUser,
		"fields": map[string]any{"coe": "kubernetes", "server_type": "vm", "cluster_distro": "kwok", "image_id": "kwok",
			"external_network_id": "none", "public": true, "labels": map[string]any{"worker_kind": "kwok"}}}
	id, err := c.SubmitJob(ctx, []any{op})
	if err != nil {
		return fmt.Errorf("creating the COE cluster template %s: %w", COEDevTemplate, err)
	}
	if status, _, err := luxi.WaitForJob(ctx, c, id, nil); status != "success" {
		return fmt.Errorf("creating the COE cluster template %s (job %d): %s %w", COEDevTemplate, id, status, err)
	}
	o.Log("COE cluster template %s (k8s_process driver, kwok workers)", COEDevTemplate)
	return nil
}
