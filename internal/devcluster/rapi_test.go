package devcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/bootstrap"
)

func TestRAPIEnvRoundTrip(t *testing.T) {
	for _, env := range []RAPIEnv{
		{URL: "https://127.0.0.7:40123", User: "dev-admin", Password: "ABCDEFGHIJKLMNOPQRSTUVWXYZ", CA: "/var/lib/corral-dev/rapi/ca.pem"},
		{URL: "https://[::1]:5080", User: "o'brien", Password: `it's "$HOME" \n; rm -rf /`, CA: "/tmp/a b/ca.pem"},
		{URL: "u", User: "''", Password: "'", CA: "`c`"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, RAPIEnvFile)
		if err := WriteRAPIEnv(path, env); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("rapi.env mode %v, want 0600", fi.Mode().Perm())
		}
		got, err := ReadRAPIEnv(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got != env {
			t.Errorf("read back %+v, want %+v", got, env)
		}
		// The file is for sourcing: sh must see the same values.
		out, err := exec.Command("sh", "-c", `. "$1" && printf '%s\n%s\n%s\n%s' "$CORRAL_RAPI_URL" "$CORRAL_RAPI_USER" "$CORRAL_RAPI_PASSWORD" "$CORRAL_RAPI_CA"`, "sh", path).Output()
		if err != nil {
			t.Fatalf("sourcing rapi.env: %v", err)
		}
		if want := strings.Join([]string{env.URL, env.User, env.Password, env.CA}, "\n"); string(out) != want {
			t.Errorf("sh sees %q, want %q", out, want)
		}
	}
}

func TestWriteRAPIEnvTightensMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), RAPIEnvFile)
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteRAPIEnv(path, RAPIEnv{URL: "u", User: "a", Password: "p", CA: "c"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if err := WriteRAPIEnv(path, RAPIEnv{URL: "u", User: "a", Password: "p\nexport X=1", CA: "c"}); err == nil {
		t.Error("a value with a line break was written")
	}
}

func TestParseRAPIEnvRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"export CORRAL_RAPI_URL='u'\n",
		"export CORRAL_RAPI_URL='u'\nexport CORRAL_RAPI_USER='a'\nexport CORRAL_RAPI_PASSWORD='p'\nexport CORRAL_RAPI_CA='c\n",
		"export CORRAL_RAPI_URL=u\nexport CORRAL_RAPI_USER='a'\nexport CORRAL_RAPI_PASSWORD='p'\nexport CORRAL_RAPI_CA='c'\n",
		"export CORRAL_RAPI_URL='u'\nexport CORRAL_RAPI_USER='a'\nexport CORRAL_RAPI_PASSWORD='p'\nexport CORRAL_RAPI_CA='c'\nexport OTHER='x'\n",
		"export CORRAL_RAPI_URL\n",
	} {
		if env, err := parseRAPIEnv([]byte(in)); err == nil {
			t.Errorf("%q parsed as %+v", in, env)
		}
	}
	env, err := parseRAPIEnv([]byte("# dev\n\nexport CORRAL_RAPI_URL='u'\nCORRAL_RAPI_USER='a'\nexport CORRAL_RAPI_PASSWORD='p'\\''q'\nexport CORRAL_RAPI_CA='c'\n"))
	if err != nil || env != (RAPIEnv{URL: "u", User: "a", Password: "p'q", CA: "c"}) {
		t.Errorf("parsed %+v, %v", env, err)
	}
}

func FuzzParseRAPIEnv(f *testing.F) {
	f.Add([]byte("export CORRAL_RAPI_URL='https://127.0.0.2:5080'\nexport CORRAL_RAPI_USER='dev-admin'\nexport CORRAL_RAPI_PASSWORD='x'\\''y'\nexport CORRAL_RAPI_CA='/ca.pem'\n"))
	f.Add([]byte("export CORRAL_RAPI_URL='\n"))
	f.Add([]byte("X=\\'\\'''"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := parseRAPIEnv(data)
		if err != nil {
			return
		}
		// Whatever parses survives a write and a read unchanged.
		dir := t.TempDir()
		if err := WriteRAPIEnv(filepath.Join(dir, RAPIEnvFile), env); err != nil {
			return
		}
		again, err := ReadRAPIEnv(dir)
		if err != nil || again != env {
			t.Fatalf("%+v read back as %+v, %v", env, again, err)
		}
	})
}

// TestRAPISocketArgs: corral-rapi gets every master candidate's socket,
// the first corrald's first, so it can move on when that one is gone.
func TestRAPISocketArgs(t *testing.T) {
	l := bootstrap.Layout{RunDir: "/run/crl-x"}
	st := &State{RunDir: "/run/crl-x", Socket: l.Socket(), Procs: []Proc{
		{Name: "corral-node node1"}, {Name: "corrald"}, {Name: "corrald 2"}, {Name: "corrald 3"},
	}}
	want := []string{"--luxi-socket", "/run/crl-x/master/luxi.sock", "--luxi-socket", "/run/crl-x/c2/master/luxi.sock",
		"--luxi-socket", "/run/crl-x/c3/master/luxi.sock"}
	if got := rapiSocketArgs(st, l); !slices.Equal(got, want) {
		t.Fatalf("three candidates: %q, want %q", got, want)
	}
	st.Procs = st.Procs[:2]
	if got := rapiSocketArgs(st, l); !slices.Equal(got, want[:2]) {
		t.Fatalf("one candidate: %q, want %q", got, want[:2])
	}
	st.Procs = nil
	if got := rapiSocketArgs(st, l); !slices.Equal(got, want[:2]) {
		t.Fatalf("no corrald recorded: %q, want %q", got, want[:2])
	}
}
