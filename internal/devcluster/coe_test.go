package devcluster

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/bootstrap"
	coeapi "github.com/corral/corral/internal/coe/api"
)

// prepareCOE's http_basic users file must let the password of coe.env in
// as an administrator, and coe.env sourced by sh with SHELL unset must
// give the client everything it reads, SHELL included.
func TestCOEEnvAndUsersFile(t *testing.T) {
	l := bootstrap.Layout{StateDir: t.TempDir(), RunDir: t.TempDir()}
	if err := os.MkdirAll(filepath.Dir(l.RAPIUsers()), 0o700); err != nil {
		t.Fatal(err)
	}
	o := Options{COEAuth: COEHTTPBasic, COEPort: 0, Log: func(string, ...any) {}}
	args, env, err := prepareCOE(o, l, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(env.Endpoint, "/v1") || !strings.HasPrefix(env.Endpoint, "https://127.0.0.1:") || env.AuthType != "http_basic" {
		t.Fatalf("env %+v", env)
	}
	i := slices.Index(args, "--coe-users")
	if i < 0 || !slices.Contains(args, "--coe-port") || !slices.Contains(args, "http_basic") {
		t.Fatalf("args %v", args)
	}
	users, err := coeapi.LoadUsers(args[i+1])
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/v1/clusters", nil)
	r.SetBasicAuth(env.Username, env.Password)
	who, ok := coeapi.NewBasicAuth(users).Authenticate(r)
	if !ok || who != (coeapi.Caller{User: COEDevUser, Project: COEDevProject, Admin: true}) {
		t.Fatalf("dev user: %+v %v", who, ok)
	}

	path := filepath.Join(l.StateDir, COEEnvFile)
	if err := WriteCOEEnv(path, *env); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("coe.env mode: %v %v", fi, err)
	}
	got, err := ReadCOEEnv(l.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"OS_AUTH_TYPE=http_basic", "OS_ENDPOINT=" + env.Endpoint, "OS_USERNAME=admin", "OS_PASSWORD=" + env.Password,
		"OS_CACERT=" + l.RAPICA(), "REQUESTS_CA_BUNDLE=" + l.RAPICA()}
	if !slices.Equal(got, want) {
		t.Fatalf("read back %v, want %v", got, want)
	}
	cmd := exec.Command("/bin/sh", "-c", `. "$1" && printf '%s|%s|%s|%s' "$SHELL" "$OS_AUTH_TYPE" "$OS_ENDPOINT" "$OS_PASSWORD"`, "sh", path)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "/bin/sh|http_basic|"+env.Endpoint+"|"+env.Password {
		t.Fatalf("sh sees %q", out)
	}
	cmd = exec.Command("/bin/sh", "-c", `. "$1" && printf '%s|' "$SHELL"`, "sh", path)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SHELL=/bin/zsh"}
	if out, _ := cmd.Output(); !strings.HasPrefix(string(out), "/bin/zsh|") {
		t.Fatalf("coe.env overrode the user's SHELL: %q", out)
	}

	// noauth: no users file, the endpoint without credentials.
	o.COEAuth = COENoAuth
	args, env, err = prepareCOE(o, l, "127.0.0.1")
	if err != nil || env.AuthType != "none" || slices.Contains(args, "--coe-users") || !slices.Contains(args, "noauth") {
		t.Fatalf("noauth: %v %+v %v", args, env, err)
	}
	o.COEAuth = COEOff
	if args, env, err = prepareCOE(o, l, "127.0.0.1"); args != nil || env != nil || err != nil {
		t.Fatalf("off: %v %+v %v", args, env, err)
	}
}
