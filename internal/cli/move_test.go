package cli

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/move"
)

// moveFiles writes a CA certificate and a password file (with a second
// line that must be ignored) and returns their paths.
func moveFiles(t *testing.T, caPEM []byte) (ca, pw string) {
	dir := t.TempDir()
	ca, pw = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "pw")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pw, []byte("secret\nnot the password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, pw
}

// moveRAPI is a RAPI server knowing user admin/secret and no instance.
func moveRAPI(t *testing.T) (*httptest.Server, []byte, func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" as "+u)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case !ok || u != "admin" || p != "secret":
			w.WriteHeader(401)
			io.WriteString(w, `{"code": 401, "message": "Unauthorized", "explain": ""}`)
		case r.URL.Path == "/version":
			io.WriteString(w, "2")
		case r.URL.Path == "/2/tags":
			io.WriteString(w, "7")
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"code": 404, "message": "Not Found", "explain": ""}`)
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, caPEM, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

func runMoveArgs(t *testing.T, run func(*cobra.Command, *move.Mover, []move.Request, bool) error, args ...string) (string, int) {
	root := &cobra.Command{Use: "corral", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(newMoveCmd(run))
	var errw bytes.Buffer
	root.SetErr(&errw)
	root.SetOut(&errw)
	code := Execute(context.Background(), root, append([]string{"move"}, args...))
	return errw.String(), code
}

func TestMoveFlags(t *testing.T) {
	_, caPEM, _ := moveRAPI(t)
	ca, pw := moveFiles(t, caPEM)
	creds := []string{"--src-ca-file", ca, "--src-username", "admin", "--src-password-file", pw}

	type got struct {
		m      *move.Mover
		reqs   []move.Request
		dryRun bool
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, g got)
		err   string // usage/parameter error expected
	}{
		{name: "defaults", args: append(creds, "c1.example.com", "https://c2.example.com:1234/", "web1", "web2"),
			check: func(t *testing.T, g got) {
				if g.m.Src.Name != "https://c1.example.com:5080" || g.m.Dest.Name != "https://c2.example.com:1234" ||
					g.m.Dest.User != "admin" || g.m.Parallel != 1 || g.m.OpportunisticTries != 0 ||
					g.m.OpportunisticDelay != 30*time.Second || g.dryRun {
					t.Errorf("mover %+v (src %+v, dest %+v)", g.m, g.m.Src, g.m.Dest)
				}
				want := []move.Request{{Instance: "web1", Overrides: move.Overrides{Compress: "none"}}, {Instance: "web2", Overrides: move.Overrides{Compress: "none"}}}
				if !reflect.DeepEqual(g.reqs, want) {
					t.Errorf("requests %+v", g.reqs)
				}
			}},
		{name: "everything", args: append(creds, "--src-rapi-port", "6080", "--dest-username", "other", "--dest-password-file", pw,
			"--dest-instance-name", "web9", "--dest-primary-node", "n1", "--dest-secondary-node", "n2", "--dest-disk-template", "plain",
			"--compress", "zstd", "-B", "memory=1G,vcpus=2", "-H", "acpi=false", "-O", "dhcp=yes", "--net", "0:link=br1",
			"-p", "3", "--opportunistic-tries", "2", "--opportunistic-delay", "5", "--keep-source-instance", "--dry-run",
			"c1", "[fd00::1]", "web1"),
			check: func(t *testing.T, g got) {
				if g.m.Src.Name != "https://c1:6080" || g.m.Dest.Name != "https://[fd00::1]:6080" || g.m.Dest.User != "other" ||
					g.m.Parallel != 3 || g.m.OpportunisticTries != 2 || g.m.OpportunisticDelay != 5*time.Second || !g.dryRun {
					t.Errorf("mover %+v (src %+v, dest %+v)", g.m, g.m.Src, g.m.Dest)
				}
				want := move.Overrides{DestName: "web9", PrimaryNode: "n1", SecondNode: "n2", DiskTemplate: "plain", Compress: "zstd",
					BEParams: map[string]any{"memory": int64(1024), "vcpus": int64(2)}, HVParams: map[string]any{"acpi": "false"},
					OSParams: map[string]any{"dhcp": "yes"}, NICs: []map[string]any{{"link": "br1"}}, KeepSource: true}
				if len(g.reqs) != 1 || !reflect.DeepEqual(g.reqs[0].Overrides, want) {
					t.Errorf("overrides %+v\nwant      %+v", g.reqs[0].Overrides, want)
				}
			}},
		{name: "too few arguments", args: append(creds, "c1", "c2"), err: "expected the source cluster"},
		{name: "name with two instances", args: append(creds, "--dest-instance-name", "x", "c1", "c2", "a", "b"), err: "--dest-instance-name can only be used when moving exactly one instance"},
		{name: "node with two instances", args: append(creds, "--dest-primary-node", "x", "c1", "c2", "a", "b"), err: "--dest-primary-node can only be used"},
		{name: "same instance twice", args: append(creds, "c1", "c2", "a", "a"), err: "given twice"},
		{name: "bad compression", args: append(creds, "--compress", "lzma", "c1", "c2", "a"), err: `--compress: "lzma" is not one of`},
		{name: "allocator and node", args: append(creds, "-I", "hail", "--dest-primary-node", "n1", "c1", "c2", "a"), err: "exclude each other"},
		{name: "secondary alone", args: append(creds, "--dest-secondary-node", "n1", "c1", "c2", "a"), err: "needs --dest-primary-node"},
		{name: "parallel 0", args: append(creds, "-p", "0", "c1", "c2", "a"), err: "--parallel must be at least 1"},
		{name: "http URL", args: append(creds, "http://c1:5080", "c2", "a"), err: "source cluster: \"http://c1:5080\" is not a host name"},
		{name: "no CA", args: []string{"c1", "c2", "a"}, err: "source cluster: no CA certificate"},
		{name: "user without password", args: []string{"--src-ca-file", ca, "--src-username", "u", "c1", "c2", "a"}, err: `no password for user "u"`},
		{name: "bad -B", args: append(creds, "-B", "vcpus=many", "c1", "c2", "a"), err: "vcpus must be a non-negative integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g *got
			out, code := runMoveArgs(t, func(_ *cobra.Command, m *move.Mover, reqs []move.Request, dry bool) error {
				g = &got{m, reqs, dry}
				return nil
			}, tc.args...)
			if tc.err != "" {
				if code != ExitUsage || !strings.Contains(out, tc.err) || g != nil {
					t.Errorf("exit %d, output %q; want status 2 saying %q", code, out, tc.err)
				}
				return
			}
			if code != 0 || g == nil {
				t.Fatalf("exit %d: %s", code, out)
			}
			tc.check(t, *g)
		})
	}
}

func TestMoveDryRunChecklist(t *testing.T) {
	srv, caPEM, seen := moveRAPI(t)
	ca, pw := moveFiles(t, caPEM)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	var out, errw bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errw, Getenv: func(string) string { return "" }, IsTerminal: func(any) bool { return false }}
	// The destination is the same server as an URL; its CA and
	// credentials default to the source's.
	code := Execute(context.Background(), NewRoot(env, nil, nil), []string{"instance", "move", "--dry-run",
		"--src-ca-file", ca, "--src-username", "admin", "--src-password-file", pw, "--src-rapi-port", port,
		"127.0.0.1", srv.URL, "web1"})
	if code != ExitError || !strings.Contains(errw.String(), "Failure: the preflight found problems; nothing was moved") {
		t.Errorf("exit %d, stderr %q", code, errw.String())
	}
	for _, want := range []string{
		"ok       source cluster " + srv.URL + " answers (RAPI version 2)\n",
		"ok       destination cluster " + srv.URL + " answers",
		`ok       destination credentials allow changes: user "admin" has write access`,
		"FAILED   instance web1 exists on the source: source cluster: instance web1 not found on " + srv.URL,
		"skipped  destination accepts web1 as web1 (dry run)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("checklist lacks %q:\n%s", want, out.String())
		}
	}
	for _, r := range seen() {
		if !strings.HasSuffix(r, " as admin") || strings.HasPrefix(r, "POST") {
			t.Errorf("request %s", r)
		}
	}
}

func TestMoveWrongPasswordExitStatus(t *testing.T) {
	srv, caPEM, _ := moveRAPI(t)
	ca, _ := moveFiles(t, caPEM)
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("wrong\n"), 0o600)
	var out, errw bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errw, Getenv: func(string) string { return "" }, IsTerminal: func(any) bool { return false }}
	code := Execute(context.Background(), NewRoot(env, nil, nil), []string{"instance", "move",
		"--src-ca-file", ca, "--src-username", "admin", "--src-password-file", bad, srv.URL, srv.URL, "web1"})
	if code != 7 || !strings.Contains(errw.String(), `source cluster: authentication failed for user "admin"`) ||
		!strings.Contains(out.String(), "[web1] FAILED") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out.String(), errw.String())
	}
}

func TestClusterURL(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		port int
		want string // "" for an error
	}{
		{"c1", 5080, "https://c1:5080"},
		{"c1.example.com", 6080, "https://c1.example.com:6080"},
		{"c1:7000", 5080, "https://c1:7000"},
		{"10.0.0.1", 5080, "https://10.0.0.1:5080"},
		{"fd00::1", 5080, "https://[fd00::1]:5080"},
		{"[fd00::1]", 5080, "https://[fd00::1]:5080"},
		{"https://c1:5080/", 1, "https://c1:5080"},
		{"https://c1/prefix", 1, "https://c1/prefix"},
		{"http://c1:5080", 5080, ""},
		{"https://", 5080, ""},
		{"https://u:p@c1", 5080, ""},
		{"", 5080, ""},
		{"c1/x", 5080, ""},
		{"c1", 0, ""},
		{"c1:99999", 5080, ""},
	} {
		got, err := clusterURL(tc.arg, tc.port)
		if (tc.want == "") != (err != nil) || got != tc.want {
			t.Errorf("clusterURL(%q, %d) = %q, %v; want %q", tc.arg, tc.port, got, err, tc.want)
		}
	}
}

func FuzzClusterURL(f *testing.F) {
	for _, s := range []string{"c1", "c1:7000", "fd00::1", "https://c1:5080/", "http://c1", "[::1]:80", "a b", "\x1c", "c1:0"} {
		f.Add(s, 5080)
	}
	f.Fuzz(func(t *testing.T, arg string, port int) {
		got, err := clusterURL(arg, port)
		if err != nil {
			return
		}
		u, perr := url.Parse(got)
		if perr != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
			t.Fatalf("clusterURL(%q, %d) = %q, not an https URL with a host", arg, port, got)
		}
	})
}
