package luxi

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// scripted answers each call with a fixed JSON reply and records what it saw.
type scripted struct {
	mu      sync.Mutex
	replies map[string]string // method -> JSON result
	calls   []string          // method + JSON args, in order
}

func (s *scripted) Call(_ context.Context, method string, args []json.RawMessage) (any, error) {
	b, _ := json.Marshal(args)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, method+" "+string(b))
	reply, ok := s.replies[method]
	if !ok {
		return nil, ecode.New(ecode.LuxiError, ecode.Inval, "unknown method "+method)
	}
	return json.RawMessage(reply), nil
}

func (s *scripted) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		return ""
	}
	return s.calls[len(s.calls)-1]
}

func TestTypedHelpers(t *testing.T) {
	h := &scripted{}
	s := startServer(t, h, ServerOptions{})
	c := dial(t, s.Addr())
	ctx := context.Background()
	serial := int64(7)
	until := 1700000000.5
	op := map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 1}

	tests := []struct {
		name     string
		reply    string
		call     func() (any, error)
		wantCall string
		want     any
	}{
		{"SubmitJob", `42`,
			func() (any, error) { return c.SubmitJob(ctx, []any{op}) },
			`SubmitJob [[{"OP_ID":"OP_TEST_DELAY","duration":1}]]`, int64(42)},
		{"SubmitJob old string id", `"43"`,
			func() (any, error) { return c.SubmitJob(ctx, nil) },
			`SubmitJob [[]]`, int64(43)},
		{"SubmitJobToDrainedQueue", `44`,
			func() (any, error) { return c.SubmitJobToDrainedQueue(ctx, []any{op}) },
			`SubmitJobToDrainedQueue [[{"OP_ID":"OP_TEST_DELAY","duration":1}]]`, int64(44)},
		{"SubmitManyJobs", `[[true, 10], [false, "Queue drained"], [true, "12"]]`,
			func() (any, error) { return c.SubmitManyJobs(ctx, [][]any{{op}, nil, {op, op}}) },
			`SubmitManyJobs [[[{"OP_ID":"OP_TEST_DELAY","duration":1}],[],[{"OP_ID":"OP_TEST_DELAY","duration":1},{"OP_ID":"OP_TEST_DELAY","duration":1}]]]`,
			[]SubmitResult{{OK: true, JobID: 10}, {Err: "Queue drained"}, {OK: true, JobID: 12}}},
		{"WaitForJobChange first", `[["running"], [[1, [1700000000, 5], "message", "hello"]]]`,
			func() (any, error) { return c.WaitForJobChange(ctx, 5, []string{"status"}, nil, nil, 89) },
			`WaitForJobChange [5,["status"],null,null,89]`,
			&JobChange{JobInfo: []any{"running"}, LogEntries: [][]any{{1.0, []any{1700000000.0, 5.0}, "message", "hello"}}}},
		{"WaitForJobChange later", `"nochange"`,
			func() (any, error) {
				return c.WaitForJobChange(ctx, 5, []string{"status"}, []any{"running"}, &serial, 10)
			},
			`WaitForJobChange [5,["status"],["running"],7,10]`, &JobChange{NoChange: true}},
		{"CancelJob", `[true, "Dequeued job 5"]`,
			func() (any, error) { ok, msg, err := c.CancelJob(ctx, 5, true); return []any{ok, msg}, err },
			`CancelJob [5,true]`, []any{true, "Dequeued job 5"}},
		{"ChangeJobPriority", `[false, "Job 5 is finished"]`,
			func() (any, error) { ok, msg, err := c.ChangeJobPriority(ctx, 5, -10); return []any{ok, msg}, err },
			`ChangeJobPriority [5,-10]`, []any{false, "Job 5 is finished"}},
		{"ArchiveJob", `true`,
			func() (any, error) { return c.ArchiveJob(ctx, 5) },
			`ArchiveJob [5]`, true},
		{"AutoArchiveJobs", `[3, 1]`,
			func() (any, error) { a, r, err := c.AutoArchiveJobs(ctx, -1, 89); return []int{a, r}, err },
			`AutoArchiveJobs [-1,89]`, []int{3, 1}},
		{"QueryJobs", `[["success", 5], null]`,
			func() (any, error) { return c.QueryJobs(ctx, []int64{5, 99}, []string{"status", "id"}) },
			`QueryJobs [[5,99],["status","id"]]`, [][]any{{"success", 5.0}, nil}},
		{"QueryJobs all", `[]`,
			func() (any, error) { return c.QueryJobs(ctx, nil, []string{"id"}) },
			`QueryJobs [[],["id"]]`, [][]any{}},
		{"Query", `{"fields":[{"name":"name","title":"Instance","kind":"text","doc":"Instance name"}],"data":[[[0,"web1"]],[[0,"web2"]]]}`,
			func() (any, error) {
				return c.Query(ctx, "instance", []string{"name"}, []any{"=", "status", "running"})
			},
			`Query ["instance",["name"],["=","status","running"]]`,
			&QueryResult{Fields: []FieldDef{{Name: "name", Title: "Instance", Kind: "text", Doc: "Instance name"}},
				Data: [][][2]any{{{0.0, "web1"}}, {{0.0, "web2"}}}}},
		{"Query no filter", `{"fields":[],"data":[]}`,
			func() (any, error) { return c.Query(ctx, "node", nil, nil) },
			`Query ["node",[],null]`, &QueryResult{Fields: []FieldDef{}, Data: [][][2]any{}}},
		{"QueryFields", `{"fields":[{"name":"status","title":"Status","kind":"text","doc":"Job status"}]}`,
			func() (any, error) { return c.QueryFields(ctx, "job", []string{"status"}) },
			`QueryFields ["job",["status"]]`,
			&QueryFieldsResult{Fields: []FieldDef{{Name: "status", Title: "Status", Kind: "text", Doc: "Job status"}}}},
		{"QueryInstances", `[["web1", 512]]`,
			func() (any, error) {
				return c.QueryInstances(ctx, []string{"web1"}, []string{"name", "be/memory"}, false)
			},
			`QueryInstances [["web1"],["name","be/memory"],false]`, [][]any{{"web1", 512.0}}},
		{"QueryNodes", `[["node1"]]`,
			func() (any, error) { return c.QueryNodes(ctx, nil, []string{"name"}, false) },
			`QueryNodes [[],["name"],false]`, [][]any{{"node1"}}},
		{"QueryGroups", `[["default"]]`,
			func() (any, error) { return c.QueryGroups(ctx, nil, []string{"name"}, false) },
			`QueryGroups [[],["name"],false]`, [][]any{{"default"}}},
		{"QueryNetworks", `[]`,
			func() (any, error) { return c.QueryNetworks(ctx, nil, []string{"name"}, false) },
			`QueryNetworks [[],["name"],false]`, [][]any{}},
		{"QueryClusterInfo", `{"name":"cluster1","software_version":"3.1.0"}`,
			func() (any, error) { return c.QueryClusterInfo(ctx) },
			`QueryClusterInfo []`, map[string]any{"name": "cluster1", "software_version": "3.1.0"}},
		{"QueryConfigValues", `["cluster1", false]`,
			func() (any, error) { return c.QueryConfigValues(ctx, []string{"cluster_name", "drain_flag"}) },
			`QueryConfigValues [["cluster_name","drain_flag"]]`, []any{"cluster1", false}},
		{"QueryTags", `["a","b"]`,
			func() (any, error) { return c.QueryTags(ctx, "instance", "web1") },
			`QueryTags ["instance","web1"]`, []string{"a", "b"}},
		{"SetDrainFlag", `true`,
			func() (any, error) { return nil, c.SetDrainFlag(ctx, true) },
			`SetDrainFlag [true]`, nil},
		{"SetWatcherPause", `1700000000.5`,
			func() (any, error) { return nil, c.SetWatcherPause(ctx, &until) },
			`SetWatcherPause [1700000000.5]`, nil},
		{"SetWatcherPause resume", `null`,
			func() (any, error) { return nil, c.SetWatcherPause(ctx, nil) },
			`SetWatcherPause [null]`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, _, _ := strings.Cut(tt.wantCall, " ")
			h.mu.Lock()
			h.replies = map[string]string{method: tt.reply}
			h.mu.Unlock()
			got, err := tt.call()
			if err != nil {
				t.Fatal(err)
			}
			if call := h.last(); call != tt.wantCall {
				t.Errorf("server saw\n  %s\nwant\n  %s", call, tt.wantCall)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestTypedHelpersRejectBadAnswers(t *testing.T) {
	h := &scripted{}
	s := startServer(t, h, ServerOptions{})
	c := dial(t, s.Addr())
	ctx := context.Background()
	tests := []struct {
		name, method, reply string
		call                func() error
	}{
		{"job id not a number", "SubmitJob", `"abc"`, func() error { _, err := c.SubmitJob(ctx, nil); return err }},
		{"job id fractional", "SubmitJob", `1.5`, func() error { _, err := c.SubmitJob(ctx, nil); return err }},
		{"many not pairs", "SubmitManyJobs", `[[true]]`, func() error { _, err := c.SubmitManyJobs(ctx, nil); return err }},
		{"many status not bool", "SubmitManyJobs", `[["yes", 1]]`, func() error { _, err := c.SubmitManyJobs(ctx, nil); return err }},
		{"wait odd string", "WaitForJobChange", `"whatever"`, func() error {
			_, err := c.WaitForJobChange(ctx, 1, nil, nil, nil, 1)
			return err
		}},
		{"wait not pair", "WaitForJobChange", `[1,2,3]`, func() error {
			_, err := c.WaitForJobChange(ctx, 1, nil, nil, nil, 1)
			return err
		}},
		{"cancel not pair", "CancelJob", `true`, func() error { _, _, err := c.CancelJob(ctx, 1, false); return err }},
		{"autoarchive short", "AutoArchiveJobs", `[1]`, func() error { _, _, err := c.AutoArchiveJobs(ctx, 1, 1); return err }},
		{"tags not strings", "QueryTags", `[1]`, func() error { _, err := c.QueryTags(ctx, "cluster", ""); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.mu.Lock()
			h.replies = map[string]string{tt.method: tt.reply}
			h.mu.Unlock()
			err := tt.call()
			e, ok := ecode.As(err)
			if !ok || e.Kind != ecode.LuxiError {
				t.Fatalf("err = %v, want a LuxiError", err)
			}
		})
	}
	// A decoding failure leaves the connection in step.
	h.mu.Lock()
	h.replies = map[string]string{"ArchiveJob": "true"}
	h.mu.Unlock()
	if ok, err := c.ArchiveJob(ctx, 1); err != nil || !ok {
		t.Fatalf("after bad answers: %v %v", ok, err)
	}
}

func TestWaitForJobChangeLost(t *testing.T) {
	h := &scripted{replies: map[string]string{"WaitForJobChange": "null"}}
	s := startServer(t, h, ServerOptions{})
	_, err := dial(t, s.Addr()).WaitForJobChange(context.Background(), 3, []string{"status"}, nil, nil, 1)
	if e, ok := ecode.As(err); !ok || e.Kind != ecode.JobLost || e.Class != ecode.NoEnt {
		t.Fatalf("err = %v, want JobLost", err)
	}
}

func TestUnknownMethodError(t *testing.T) {
	h := &scripted{}
	s := startServer(t, h, ServerOptions{})
	_, err := dial(t, s.Addr()).QueryClusterInfo(context.Background())
	if e, ok := ecode.As(err); !ok || e.Kind != ecode.LuxiError || !strings.Contains(e.Msg, "QueryClusterInfo") {
		t.Fatalf("err = %v", err)
	}
	if errors.Is(err, ErrClientClosed) {
		t.Fatal("a server error closed the client")
	}
}
