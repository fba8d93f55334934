package cli

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/rapi"
)

// remoteStack is the whole remote path in one process: the CLI, the RAPI
// client, the real RAPI handler over TLS, the LUXI backend it uses and the
// fake master behind that.
type remoteStack struct {
	fake     *fakeMaster
	url      string
	ca, pw   string // file paths
	requests atomic.Int64
}

func newRemoteStack(t *testing.T) *remoteStack {
	t.Helper()
	f := newFake(t)
	// /2/query is LUXI Query, which the fake master answers from its
	// classic rows.
	f.handle["Query"] = func(_ context.Context, args []any) (any, error) {
		what, _ := argAt(args, 0).(string)
		fields := strs(argAt(args, 1))
		objs, kind := f.instances, "Instance"
		switch what {
		case "job":
			f.mu.Lock()
			rows, err := f.builtin("QueryJobs", []any{[]any{}, argAt(args, 1)})
			f.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return map[string]any{"fields": []any{}, "data": cellRows(rows)}, nil
		case "instance":
		case "node":
			objs, kind = f.nodes, "Node"
		default:
			return nil, paramErr("fake master: no %s query", what)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		var names []string
		if l, ok := argAt(args, 2).([]any); ok {
			for _, term := range l[1:] {
				names = append(names, term.([]any)[2].(string))
			}
		}
		rows, err := classicRows(kind, objs, names, fields)
		if err != nil {
			return nil, err
		}
		return map[string]any{"fields": []any{}, "data": cellRows(rows)}, nil
	}
	s := &remoteStack{fake: f}
	be := &rapi.LuxiBackend{Socket: f.sock}
	h := rapi.NewHandler(rapi.Config{Backend: be, Users: rapi.ParseUsers([]byte("admin s3cret write\n"))})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes tested below
	srv.StartTLS()
	t.Cleanup(srv.Close)
	s.url = srv.URL
	dir := t.TempDir()
	s.ca, s.pw = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "pw")
	if err := os.WriteFile(s.ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// cellRows turns classic rows into Query's [status, value] cells.
func cellRows(rows any) []any {
	data := []any{}
	for _, r := range rows.([]any) {
		cells := []any{}
		for _, v := range r.([]any) {
			cells = append(cells, []any{0, v})
		}
		data = append(data, cells)
	}
	return data
}

// run runs the CLI with args and the given environment; it returns the exit
// status, stdout and stderr.
func (s *remoteStack) run(env map[string]string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	e := &Env{
		Stdout: &out, Stderr: &errb,
		Getenv:     func(k string) string { return env[k] },
		Now:        func() time.Time { return time.Unix(fakeEpoch, 0) },
		Location:   time.UTC,
		IsTerminal: func(any) bool { return false },
	}
	code := Execute(context.Background(), NewRoot(e, nil, nil), args)
	return code, out.String(), errb.String()
}

func (s *remoteStack) flags() []string {
	return []string{"--rapi", s.url, "--rapi-user", "admin", "--rapi-password-file", s.pw, "--rapi-ca", s.ca}
}

func TestRemoteCommands(t *testing.T) {
	s := newRemoteStack(t)
	noEnv := map[string]string{}
	run := func(args ...string) (string, string) {
		t.Helper()
		code, out, errs := s.run(noEnv, append(s.flags(), args...)...)
		if code != 0 {
			t.Fatalf("corral %v: exit %d\n%s%s", args, code, out, errs)
		}
		return out, errs
	}

	out, _ := run("cluster", "info")
	if !strings.Contains(out, "cluster.example.com") {
		t.Errorf("cluster info:\n%s", out)
	}
	out, _ = run("instance", "add", "-t", "file", "-o", "debootstrap", "-s", "1G", "web1")
	if !strings.Contains(out, "creating instance disks") {
		t.Errorf("instance add did not show the job's log:\n%s", out)
	}
	out, _ = run("instance", "list", "-o", "name,status")
	if !strings.Contains(out, "web1") || !strings.Contains(out, "running") {
		t.Errorf("instance list:\n%s", out)
	}
	run("instance", "shutdown", "web1")
	if out, _ = run("instance", "list", "--no-headers", "-o", "status", "web1"); strings.TrimSpace(out) != "ADMIN_down" {
		t.Errorf("after shutdown: %q", out)
	}
	run("instance", "startup", "web1")
	out, _ = run("job", "list")
	if !strings.Contains(out, "success") || strings.Count(out, "\n") < 4 {
		t.Errorf("job list:\n%s", out)
	}
	out, _ = run("job", "info", "1")
	if !strings.Contains(out, "OP_INSTANCE_CREATE") {
		t.Errorf("job info 1:\n%s", out)
	}
	run("instance", "remove", "-f", "web1")

	// What went to the master went through RAPI: the reason trail says so.
	s.fake.mu.Lock()
	job := s.fake.jobs[1]
	s.fake.mu.Unlock()
	op := job.ops[0].(map[string]any)
	if trail, _ := op["reason"].([]any); len(trail) == 0 || !strings.Contains(trail[len(trail)-1].([]any)[0].(string), "rlib2") {
		t.Errorf("job 1 reason trail %v: want RAPI's", op["reason"])
	}

	code, _, errs := s.run(noEnv, append(s.flags(), "instance", "list", "nosuch")...)
	if code != 3 || !strings.Contains(errs, "nosuch") {
		t.Errorf("list of an unknown instance: exit %d, %s", code, errs)
	}
	code, _, errs = s.run(noEnv, append(s.flags(), "cluster", "queue", "drain")...)
	if code != 7 || !strings.Contains(errs, "not available over RAPI; run it on the master") {
		t.Errorf("queue drain: exit %d, %s", code, errs)
	}
	if s.fake.drained {
		t.Error("the queue was drained")
	}
}

func TestRemoteModeSelection(t *testing.T) {
	s := newRemoteStack(t)
	rapiEnv := map[string]string{EnvRAPIURL: s.url, EnvRAPIUser: "admin", EnvRAPIPassword: "s3cret", EnvRAPICA: s.ca}
	withSocket := map[string]string{EnvSocket: s.fake.sock}
	for k, v := range rapiEnv {
		withSocket[k] = v
	}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		remote bool
		errs   string
	}{
		{"environment alone", rapiEnv, nil, 0, true, ""},
		{"--rapi and the environment", map[string]string{EnvRAPIUser: "admin", EnvRAPIPassword: "s3cret", EnvRAPICA: s.ca},
			[]string{"--rapi", s.url}, 0, true, ""},
		{"CORRAL_SOCKET wins over CORRAL_RAPI_URL", withSocket, nil, 0, false, ""},
		{"--socket wins over CORRAL_RAPI_URL", rapiEnv, []string{"--socket", s.fake.sock}, 0, false, ""},
		{"--rapi wins over CORRAL_SOCKET", withSocket, []string{"--rapi", s.url}, 0, true, ""},
		{"--rapi and --socket", rapiEnv, []string{"--rapi", s.url, "--socket", s.fake.sock}, 2, false, "exclude each other"},
		{"empty password file", rapiEnv, []string{"--rapi-password-file", "/dev/null", "--rapi-user", "nobody"}, 2, false, `no password for RAPI user "nobody"`},
		{"refused password", map[string]string{EnvRAPIURL: s.url, EnvRAPIUser: "admin", EnvRAPIPassword: "guess", EnvRAPICA: s.ca},
			nil, 7, true, `refused the credentials: user "admin" or its password is not accepted`},
		// The handshake fails before any request reaches the handler.
		{"foreign CA", rapiEnv, []string{"--rapi-ca", "/etc/ssl/certs/ca-certificates.crt"}, 7, false, "certificate signed by unknown authority"},
		{"no CA", map[string]string{EnvRAPIURL: s.url}, nil, 2, false, "give --rapi-ca"},
		{"plain http", rapiEnv, []string{"--rapi", "http://" + strings.TrimPrefix(s.url, "https://")}, 2, false, "want https://host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "foreign CA" {
				if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err != nil {
					t.Skip("no system CA bundle")
				}
			}
			before := s.requests.Load()
			code, out, errs := s.run(tc.env, append(tc.args, "node", "list", "-o", "name")...)
			if code != tc.code || !strings.Contains(errs, tc.errs) {
				t.Fatalf("exit %d, stderr %q; want %d and %q (stdout %q)", code, errs, tc.code, tc.errs, out)
			}
			if remote := s.requests.Load() > before; remote != tc.remote {
				t.Errorf("went through RAPI: %v, want %v", remote, tc.remote)
			}
			if strings.Contains(errs, "s3cret") || strings.Contains(out, "s3cret") {
				t.Error("the password was printed")
			}
		})
	}
}
