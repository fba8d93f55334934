package luxi

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// jobScript plays a job's life: each WaitForJobChange call must carry the
// expected arguments and gets the next answer; QueryJobs gets final.
type jobScript struct {
	t     *testing.T
	mu    sync.Mutex
	waits []scriptedWait
	final string
}

type scriptedWait struct {
	wantArgs string // JSON of the positional args
	answer   string // JSON result, or "" to fail with JobLost
}

func (j *jobScript) Call(_ context.Context, method string, args []json.RawMessage) (any, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	got, _ := json.Marshal(args)
	switch method {
	case MethodWaitForJobChange:
		if len(j.waits) == 0 {
			j.t.Errorf("unexpected WaitForJobChange %s", got)
			return nil, ecode.New(ecode.LuxiError, ecode.Inval, "script exhausted")
		}
		w := j.waits[0]
		j.waits = j.waits[1:]
		if !jsonEqual(got, []byte(w.wantArgs)) {
			j.t.Errorf("WaitForJobChange args %s, want %s", got, w.wantArgs)
		}
		if w.answer == "" {
			return nil, ecode.New(ecode.JobLost, ecode.NoEnt, "Job 9 not found")
		}
		return json.RawMessage(w.answer), nil
	case MethodQueryJobs:
		if !jsonEqual(got, []byte(`[[9],["status","opstatus","opresult"]]`)) {
			j.t.Errorf("QueryJobs args %s", got)
		}
		return json.RawMessage(j.final), nil
	}
	return nil, ecode.New(ecode.LuxiError, ecode.Inval, "unexpected "+method)
}

func TestWaitForJob(t *testing.T) {
	ts := `[1700000000, 1]`
	running := []scriptedWait{
		{`[9,["status"],null,null,89]`, `[["queued"], []]`},
		{`[9,["status"],["queued"],null,89]`, `"nochange"`},
		{`[9,["status"],["queued"],null,89]`, `[["running"], [[1,` + ts + `,"message","a"],[2,` + ts + `,"message","b"]]]`},
	}
	finish := func(status string) []scriptedWait {
		// A finished status with new entries is not the end: the entries
		// are reported and the loop asks once more.
		return append(append([]scriptedWait{}, running...),
			scriptedWait{`[9,["status"],["running"],2,89]`, `[["` + status + `"], [[3,` + ts + `,"message","c"]]]`},
			scriptedWait{`[9,["status"],["` + status + `"],3,89]`, `[["` + status + `"], []]`},
		)
	}
	tests := []struct {
		name       string
		waits      []scriptedWait
		final      string
		wantStatus string
		wantResult []any
		wantLogs   []string
		wantErr    *ecode.Error
	}{
		{name: "success", waits: finish("success"),
			final:      `[["success", ["success"], [{"x": 1}]]]`,
			wantStatus: "success", wantResult: []any{map[string]any{"x": 1.0}}, wantLogs: []string{"a", "b", "c"}},
		{name: "opcode error keeps its class", waits: finish("error"),
			final:      `[["error", ["success", "error"], [null, ["OpPrereqError", ["Instance web9 not known", "unknown_entity"]]]]]`,
			wantStatus: "error", wantResult: []any{nil, []any{"OpPrereqError", []any{"Instance web9 not known", "unknown_entity"}}},
			wantLogs: []string{"a", "b", "c"},
			wantErr:  &ecode.Error{Kind: ecode.OpPrereqError, Class: ecode.NoEnt, Msg: "Instance web9 not known"}},
		{name: "partial failure", waits: finish("error"),
			final:      `[["error", ["success", "error"], [1, "disk full"]]]`,
			wantStatus: "error", wantResult: []any{1.0, "disk full"}, wantLogs: []string{"a", "b", "c"},
			wantErr: &ecode.Error{Kind: ecode.OpExecError, Class: ecode.Fault, Msg: "partial failure (opcode 1): disk full"}},
		{name: "plain failure", waits: finish("error"),
			final:      `[["error", ["error"], ["disk full"]]]`,
			wantStatus: "error", wantResult: []any{"disk full"}, wantLogs: []string{"a", "b", "c"},
			wantErr: &ecode.Error{Kind: ecode.OpExecError, Class: ecode.Fault, Msg: "disk full"}},
		{name: "canceled", waits: []scriptedWait{{`[9,["status"],null,null,89]`, `[["canceled"], []]`}},
			final:      `[["canceled", ["canceled"], [null]]]`,
			wantStatus: "canceled", wantResult: []any{nil},
			wantErr: &ecode.Error{Kind: ecode.OpExecError, Class: ecode.Fault, Msg: "Job was canceled"}},
		{name: "lost while waiting", waits: []scriptedWait{{`[9,["status"],null,null,89]`, ``}},
			wantErr: &ecode.Error{Kind: ecode.JobLost, Class: ecode.NoEnt, Msg: "Job 9 not found"}},
		{name: "lost before the final query", waits: []scriptedWait{{`[9,["status"],null,null,89]`, `[["success"], []]`}},
			final:   `[null]`,
			wantErr: &ecode.Error{Kind: ecode.JobLost, Class: ecode.NoEnt, Msg: "Job with id 9 lost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := &jobScript{t: t, waits: tt.waits, final: tt.final}
			s := startServer(t, script, ServerOptions{})
			var logs []string
			status, res, err := WaitForJob(context.Background(), dial(t, s.Addr()), 9, func(e []any) {
				logs = append(logs, e[3].(string))
			})
			if tt.wantErr == nil && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.wantErr != nil {
				e, ok := ecode.As(err)
				if !ok || e.Kind != tt.wantErr.Kind || e.Class != tt.wantErr.Class || e.Msg != tt.wantErr.Msg {
					t.Fatalf("err = %#v, want %s/%s/%q", err, tt.wantErr.Kind, tt.wantErr.Class, tt.wantErr.Msg)
				}
			}
			if status != tt.wantStatus || !reflect.DeepEqual(res, tt.wantResult) {
				t.Errorf("got %q %#v, want %q %#v", status, res, tt.wantStatus, tt.wantResult)
			}
			if !reflect.DeepEqual(logs, tt.wantLogs) {
				t.Errorf("logs %q, want %q", logs, tt.wantLogs)
			}
			script.mu.Lock()
			defer script.mu.Unlock()
			if len(script.waits) != 0 {
				t.Errorf("%d scripted answers unused", len(script.waits))
			}
		})
	}
}
