package devcluster

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/corral/corral/internal/bootstrap"
)

// BaremetalEnvFile, in the state directory, is what `openstack baremetal`
// needs to drive the dev cluster's Bare Metal API: `. baremetal.env;
// openstack baremetal node list`. It holds a password, so only root reads
// it.
const BaremetalEnvFile = "baremetal.env"

// BaremetalDevUser is the user Up puts in the Bare Metal API's htpasswd file.
const BaremetalDevUser = "admin"

// DefaultBaremetalPort is Ironic's port, what `corral dev up` asks for.
const DefaultBaremetalPort = 6385

// Bare Metal API authentication strategies of Options.BaremetalAuth.
const (
	BaremetalHTTPBasic = "http_basic"
	BaremetalNoAuth    = "noauth"
	BaremetalOff       = "off"
)

// BaremetalEnv is what baremetal.env holds: the openstack client's
// variables for an endpoint without Keystone.
type BaremetalEnv struct {
	AuthType string // http_basic or none
	Endpoint string // https://<master address>:<port>
	Username string // http_basic only
	Password string
	CACert   string
}

// Vars are the environment variables, in file order.
func (e BaremetalEnv) Vars() [][2]string {
	vars := [][2]string{{"OS_AUTH_TYPE", e.AuthType}, {"OS_ENDPOINT", e.Endpoint}}
	if e.AuthType == BaremetalHTTPBasic {
		vars = append(vars, [2]string{"OS_USERNAME", e.Username}, [2]string{"OS_PASSWORD", e.Password})
	}
	return append(vars, [2]string{"OS_CACERT", e.CACert})
}

// baremetalListen picks the Bare Metal API's port on ip: the one asked
// for, or, when that is 0 or the default one is taken, a free one.
func baremetalListen(o Options, ip string) (int, error) {
	return freePortOr(o, ip, o.BaremetalPort, DefaultBaremetalPort, "Bare Metal API")
}

// prepareBaremetal makes corral-rapi's Bare Metal API flags: its listener
// on ip with the RAPI certificate, and for http_basic an htpasswd file
// (bcrypt) with a new password for BaremetalDevUser, readable only by the
// owner of the RAPI users file (corral-rapi). It returns no flags when the
// API is off.
func prepareBaremetal(o Options, l bootstrap.Layout, ip string) ([]string, *BaremetalEnv, error) {
	if o.BaremetalAuth == BaremetalOff {
		return nil, nil, nil
	}
	port, err := baremetalListen(o, ip)
	if err != nil {
		return nil, nil, fmt.Errorf("Bare Metal API port: %w", err)
	}
	env := &BaremetalEnv{AuthType: "none", Endpoint: "https://" + net.JoinHostPort(ip, strconv.Itoa(port)), CACert: l.RAPICA()}
	args := []string{"--baremetal-bind", ip, "--baremetal-port", strconv.Itoa(port),
		"--baremetal-cert", l.RAPICert(), "--baremetal-key", l.RAPIKey()}
	if o.BaremetalAuth == BaremetalNoAuth {
		return append(args, "--baremetal-auth", BaremetalNoAuth), env, nil
	}
	env.AuthType, env.Username, env.Password = BaremetalHTTPBasic, BaremetalDevUser, rand.Text()
	hash, err := bcrypt.GenerateFromPassword([]byte(env.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, nil, err
	}
	file := filepath.Join(filepath.Dir(l.RAPIUsers()), "baremetal.htpasswd")
	if err := writeOwnedLike(file, env.Username+":"+string(hash)+"\n", l.RAPIUsers()); err != nil {
		return nil, nil, err
	}
	return append(args, "--baremetal-auth", BaremetalHTTPBasic, "--baremetal-htpasswd", file), env, nil
}

// WriteBaremetalEnv writes env as a shell file to source (mode 0600).
func WriteBaremetalEnv(path string, env BaremetalEnv) error {
	var b strings.Builder
	for _, kv := range env.Vars() {
		if strings.ContainsAny(kv[1], "\x00\r\n") {
			return fmt.Errorf("%s holds a line break or NUL", kv[0])
		}
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return writePrivate(path, b.String())
}

// ReadBaremetalEnv reads the baremetal.env of a dev cluster's state
// directory as NAME=value entries, for a child process's environment.
func ReadBaremetalEnv(stateDir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, BaremetalEnvFile))
	if err != nil {
		return nil, err
	}
	var out []string
	for n, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, quoted, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if !ok {
			return nil, fmt.Errorf("%s line %d: no NAME=value", BaremetalEnvFile, n+1)
		}
		v, err := shellUnquote(quoted)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", BaremetalEnvFile, n+1, err)
		}
		out = append(out, name+"="+v)
	}
	return out, nil
}

// writePrivate writes a file only its owner reads, whatever mode an older
// one had.
func writePrivate(path, content string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
