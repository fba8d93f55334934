package rapiclient

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/rapi"
	"github.com/corral/corral/internal/secret"
)

// fakeBackend is a tiny corrald for the RAPI handler: instances with a
// status, jobs that end at once with one log entry, and the opcodes
// submitted, recorded.
type fakeBackend struct {
	// The embedded interface keeps the fake compiling as the Backend
	// grows; a method it lacks panics if called.
	rapi.Backend

	mu        sync.Mutex
	instances map[string]string // name -> status
	tags      map[string][]string
	jobs      map[int64]*fakeJob
	nextJob   int64
	submitted [][]any
}

type fakeJob struct {
	ops    []any
	status string
	log    [][]any
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		instances: map[string]string{"web1": "running", "web2": "ADMIN_down"},
		tags:      map[string][]string{"instance/web1": {"a", "b"}},
		jobs:      map[int64]*fakeJob{5: {ops: []any{map[string]any{"OP_ID": "OP_TEST_DELAY"}}, status: "queued"}},
		nextJob:   10,
	}
}

func (f *fakeBackend) lastOps() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.submitted) == 0 {
		return nil
	}
	return f.submitted[len(f.submitted)-1]
}

func (f *fakeBackend) QueryClusterInfo(context.Context) (map[string]any, error) {
	return map[string]any{"name": "cl.example.com", "master": "node1", "enabled_disk_templates": []any{"file"}}, nil
}

func (f *fakeBackend) QueryInstances(_ context.Context, names, fields []string) ([][]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(names) == 0 {
		for n := range f.instances {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	var out [][]any
	for _, n := range names {
		st, ok := f.instances[n]
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "Instance '%s' not known", n)
		}
		row := make([]any, len(fields))
		for i, fl := range fields {
			switch fl {
			case "name":
				row[i] = n
			case "status":
				row[i] = st
			}
		}
		out = append(out, row)
	}
	return out, nil
}

func (f *fakeBackend) QueryNodes(context.Context, []string, []string) ([][]any, error) {
	return nil, nil
}

func (f *fakeBackend) QueryGroups(context.Context, []string, []string) ([][]any, error) {
	return nil, nil
}

func (f *fakeBackend) jobRow(id int64, fields []string) []any {
	j, ok := f.jobs[id]
	if !ok {
		return nil
	}
	row := make([]any, len(fields))
	for i, fl := range fields {
		switch fl {
		case "id":
			row[i] = float64(id)
		case "status":
			row[i] = j.status
		case "ops":
			row[i] = j.ops
		case "opstatus":
			row[i] = []any{j.status}
		case "opresult":
			row[i] = []any{"done"}
		case "priority":
			row[i] = 0.0
		}
	}
	return row
}

func (f *fakeBackend) QueryJobs(_ context.Context, ids []int64, fields []string) ([][]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(ids) == 0 {
		for id := range f.jobs {
			ids = append(ids, id)
		}
		slices.Sort(ids)
	}
	var out [][]any
	for _, id := range ids {
		out = append(out, f.jobRow(id, fields))
	}
	return out, nil
}

func (f *fakeBackend) QueryTags(_ context.Context, kind, name string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tags[kind+"/"+name]
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "%s '%s' not known", kind, name)
	}
	return t, nil
}

// Query supports what the client sends: instances by an or of name
// equalities, and every job.
func (f *fakeBackend) Query(ctx context.Context, what string, fields []string, filter any) (*luxi.QueryResult, error) {
	var rows [][]any
	switch what {
	case "instance":
		all, _ := f.QueryInstances(ctx, nil, append([]string{"name"}, fields...))
		for _, r := range all {
			if filter == nil || filterHas(filter, r[0].(string)) {
				rows = append(rows, r[1:])
			}
		}
	case "job":
		if filter != nil {
			return nil, ecode.Errorf(ecode.Inval, "Filters on jobs are not supported")
		}
		f.mu.Lock()
		for id := range f.jobs {
			rows = append(rows, f.jobRow(id, fields))
		}
		f.mu.Unlock()
	default:
		return nil, ecode.Errorf(ecode.Inval, "Unknown resource '%s'", what)
	}
	res := &luxi.QueryResult{}
	for _, fl := range fields {
		res.Fields = append(res.Fields, luxi.FieldDef{Name: fl, Title: fl, Kind: "other"})
	}
	for _, r := range rows {
		cells := make([][2]any, len(r))
		for i, v := range r {
			cells[i] = [2]any{0.0, v}
			if v == nil {
				cells[i] = [2]any{2.0, nil}
			}
		}
		res.Data = append(res.Data, cells)
	}
	return res, nil
}

func filterHas(filter any, name string) bool {
	l, _ := filter.([]any)
	if len(l) == 0 || l[0] != "|" {
		return false
	}
	for _, term := range l[1:] {
		t, _ := term.([]any)
		if len(t) == 3 && t[0] == "=" && t[1] == "name" && t[2] == name {
			return true
		}
	}
	return false
}

func (f *fakeBackend) QueryFields(_ context.Context, what string, fields []string) (*luxi.QueryFieldsResult, error) {
	res := &luxi.QueryFieldsResult{}
	for _, fl := range fields {
		res.Fields = append(res.Fields, luxi.FieldDef{Name: fl, Title: what + ":" + fl, Kind: "text"})
	}
	return res, nil
}

func (f *fakeBackend) SubmitJob(_ context.Context, ops []any) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextJob++
	id := f.nextJob
	f.submitted = append(f.submitted, ops)
	opID := ops[0].(map[string]any)["OP_ID"]
	f.jobs[id] = &fakeJob{ops: ops, status: "success", log: [][]any{{1.0, []any{1.0, 0.0}, "message", fmt.Sprintf("did %v", opID)}}}
	return id, nil
}

func (f *fakeBackend) CancelJob(_ context.Context, id int64) (bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.jobs[id]; !ok {
		return false, "", ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job %d not found", id))
	}
	return false, "Job already finished", nil
}

func (f *fakeBackend) WaitForJobChange(_ context.Context, id int64, fields []string, prev []any, prevSerial *int64, _ int) (*luxi.JobChange, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return nil, ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job with id %d lost", id))
	}
	info := f.jobRow(id, fields)
	var logs [][]any
	for _, e := range j.log {
		if prevSerial == nil || int64(e[0].(float64)) > *prevSerial {
			logs = append(logs, e)
		}
	}
	// A finished job answers at once, as corrald does.
	if len(logs) == 0 && prev != nil && slices.Equal(prev, info) && j.status == "queued" {
		return &luxi.JobChange{NoChange: true}, nil
	}
	return &luxi.JobChange{JobInfo: info, LogEntries: logs}, nil
}

// testServer is the real RAPI handler over TLS on a fake backend, with a
// write user "admin" (password "secret") and a read user "viewer".
type testServer struct {
	srv   *httptest.Server
	be    *fakeBackend
	caPEM []byte
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	be := newFakeBackend()
	h := rapi.NewHandler(rapi.Config{Backend: be, Users: rapi.ParseUsers([]byte("admin secret write\nviewer look read\n"))})
	srv := httptest.NewUnstartedServer(h)
	// The foreign-CA test makes the server log a failed handshake.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &testServer{srv: srv, be: be, caPEM: caPEM}
}

func (s *testServer) client(t *testing.T, user, password string) *Client {
	t.Helper()
	c, err := New(Config{URL: s.srv.URL, User: user, Password: secret.Secret(password), CAPEM: s.caPEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (s *testServer) luxi(t *testing.T, user, password string) *luxi.Client {
	c := s.client(t, user, password)
	return luxi.NewCallClient(c.Call, c.Close)
}
