package move

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/rapiclient"
	"github.com/corral/corral/internal/secret"
)

// fakeRAPI is a RAPI server over TLS that records the requests it gets and
// plays the jobs a test plans for them, one step per wait request.
type fakeRAPI struct {
	t     *testing.T
	srv   *httptest.Server
	caPEM []byte

	mu        sync.Mutex
	users     map[string]string // user → password; all have write access
	readers   map[string]bool   // users with read access only
	reqs      []fakeReq
	jobs      map[int64]*fakeJob
	nextID    int64
	instances map[string]map[string]any
	// plan makes the job of a job-submitting request; nil answers 404.
	plan func(r fakeReq) *fakeJob
}

type fakeReq struct {
	Method, Path, Query string
	Body                any
}

func (r fakeReq) String() string {
	s := r.Method + " " + r.Path
	if r.Query != "" {
		s += "?" + r.Query
	}
	return s
}

// fakeStep is one job step: log entries revealed at once, after the gate
// (if any) is closed.
type fakeStep struct {
	gate <-chan struct{}
	logs [][2]any // type, message
}

type fakeJob struct {
	id       int64
	steps    []fakeStep
	pos      int
	log      [][]any
	serial   int64
	status   string
	final    string // status once the steps are done
	result   any    // success result or encoded error
	canceled chan struct{}
}

// okJob succeeds with result after steps.
func okJob(result any, steps ...fakeStep) *fakeJob {
	return &fakeJob{steps: steps, final: "success", result: result}
}

// failJob fails with an encoded error after steps.
func failJob(kind, msg, class string, steps ...fakeStep) *fakeJob {
	args := []any{msg}
	if class != "" {
		args = append(args, class)
	}
	return &fakeJob{steps: steps, final: "error", result: []any{kind, args}}
}

func msgStep(msgs ...string) fakeStep {
	s := fakeStep{}
	for _, m := range msgs {
		s.logs = append(s.logs, [2]any{"message", m})
	}
	return s
}

func newFakeRAPI(t *testing.T) *fakeRAPI {
	f := &fakeRAPI{t: t, users: map[string]string{"admin": "secret"}, readers: map[string]bool{},
		jobs: map[int64]*fakeJob{}, nextID: 100, instances: map[string]map[string]any{}}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	f.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	return f
}

func (f *fakeRAPI) cluster(t *testing.T, user, password string) *Cluster {
	c, err := rapiclient.New(rapiclient.Config{URL: f.srv.URL, User: user, Password: secret.Secret(password), CAPEM: f.caPEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Cluster{Name: f.srv.URL, User: user, Client: c}
}

// requests returns the recorded requests as "METHOD path?query".
func (f *fakeRAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reqs {
		out = append(out, r.String())
	}
	return out
}

// request returns the first recorded request with this method and path.
func (f *fakeRAPI) request(method, path string) (fakeReq, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.reqs {
		if r.Method == method && r.Path == path {
			return r, true
		}
	}
	return fakeReq{}, false
}

// opportunistic lists the opportunistic_locking of every creation.
func (f *fakeRAPI) opportunistic() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []any
	for _, r := range f.reqs {
		if r.Method == http.MethodPost && r.Path == "/2/instances" {
			out = append(out, r.Body.(map[string]any)["opportunistic_locking"])
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func httpErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg, "explain": ""})
}

func (f *fakeRAPI) serve(w http.ResponseWriter, r *http.Request) {
	var body any
	if data, _ := io.ReadAll(r.Body); len(data) > 0 {
		if err := json.Unmarshal(data, &body); err != nil {
			httpErr(w, 400, "Unable to parse JSON data")
			return
		}
	}
	req := fakeReq{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body}
	user, pw, hasAuth := r.BasicAuth()
	needWrite := r.Method != http.MethodGet || strings.HasSuffix(r.URL.Path, "/wait")
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	known := hasAuth && f.users[user] == pw && pw != ""
	reader := f.readers[user]
	f.mu.Unlock()
	switch {
	case (needWrite || hasAuth) && !known:
		w.Header().Set("WWW-Authenticate", `Basic realm="Ganeti Remote API"`)
		httpErr(w, 401, "Unauthorized")
		return
	case needWrite && reader:
		httpErr(w, 403, "Forbidden")
		return
	}
	path := r.URL.Path
	switch {
	case path == "/version":
		writeJSON(w, 200, 2)
	case path == "/2/tags" && r.Method == http.MethodPut:
		writeJSON(w, 200, 1)
	case strings.HasPrefix(path, "/2/jobs/"):
		f.serveJob(w, r, strings.TrimPrefix(path, "/2/jobs/"), body)
	case strings.HasPrefix(path, "/2/instances/") && strings.Count(path, "/") == 3 && r.Method == http.MethodGet:
		f.mu.Lock()
		inst, ok := f.instances[strings.TrimPrefix(path, "/2/instances/")]
		f.mu.Unlock()
		if !ok {
			httpErr(w, 404, "Not Found")
			return
		}
		writeJSON(w, 200, inst)
	default:
		var j *fakeJob
		if f.plan != nil {
			j = f.plan(req)
		}
		if j == nil {
			httpErr(w, 404, "Not Found")
			return
		}
		f.mu.Lock()
		f.nextID++
		j.id, j.status, j.canceled = f.nextID, "queued", make(chan struct{})
		f.jobs[j.id] = j
		f.mu.Unlock()
		writeJSON(w, 200, j.id)
	}
}

func (f *fakeRAPI) serveJob(w http.ResponseWriter, r *http.Request, rest string, body any) {
	idStr, wait := strings.CutSuffix(rest, "/wait")
	id, _ := strconv.ParseInt(idStr, 10, 64)
	f.mu.Lock()
	j, ok := f.jobs[id]
	f.mu.Unlock()
	if !ok {
		httpErr(w, 404, "Job not found")
		return
	}
	switch {
	case r.Method == http.MethodDelete:
		f.mu.Lock()
		defer f.mu.Unlock()
		if finalized(j.status) {
			writeJSON(w, 200, []any{false, "Job already finished"})
			return
		}
		j.status = "canceled"
		close(j.canceled)
		writeJSON(w, 200, []any{true, fmt.Sprintf("Job %d canceled", id)})
	case wait:
		var prevSerial int64 = -1
		if m, ok := body.(map[string]any); ok {
			if s, ok := m["previous_log_serial"].(float64); ok {
				prevSerial = int64(s)
			}
			if fl, ok := m["fields"].([]any); !ok || len(fl) != 1 || fl[0] != "status" {
				httpErr(w, 400, "fields must be [status]")
				return
			}
		}
		if !f.advance(j) {
			writeJSON(w, 200, nil)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		var entries []any
		for _, e := range j.log {
			if e[0].(int64) > prevSerial {
				entries = append(entries, e)
			}
		}
		writeJSON(w, 200, map[string]any{"job_info": []any{j.status}, "log_entries": entries})
	default:
		f.mu.Lock()
		defer f.mu.Unlock()
		opresult := []any{nil}
		if finalized(j.status) && j.status != "canceled" {
			opresult = []any{j.result}
		}
		writeJSON(w, 200, map[string]any{"id": id, "status": j.status, "opstatus": []any{j.status}, "opresult": opresult})
	}
}

// advance plays the job's next step; false means nothing changed within
// the (short) wait timeout.
func (f *fakeRAPI) advance(j *fakeJob) bool {
	f.mu.Lock()
	if finalized(j.status) {
		f.mu.Unlock()
		return true
	}
	if j.pos == len(j.steps) {
		j.status = j.final
		f.mu.Unlock()
		return true
	}
	st := j.steps[j.pos]
	f.mu.Unlock()
	if st.gate != nil {
		select {
		case <-st.gate:
		case <-j.canceled:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if finalized(j.status) {
		return true
	}
	j.status = "running"
	j.pos++
	for _, l := range st.logs {
		j.serial++
		j.log = append(j.log, []any{j.serial, []any{1700000000, 0}, l[0], l[1]})
	}
	return true
}
