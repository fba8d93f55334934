package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// fakeMaster is a scripted LUXI handler behind luxi's real server: a small
// in-memory stand-in for corrald whose jobs finish the moment they are
// submitted, with a log and result chosen per opcode. It records every call
// so tests can check what the CLI sent.
type fakeMaster struct {
	sock string

	mu        sync.Mutex
	calls     []fakeCall
	jobs      map[int64]*fakeJob
	nextID    int64
	drained   bool
	pause     any
	instances map[string]map[string]any
	nodes     map[string]map[string]any
	locks     []any
	// outcome overrides how a job ends; nil uses defaultOutcome.
	outcome func(op map[string]any) jobOutcome
	// handle overrides a method.
	handle map[string]func(ctx context.Context, args []any) (any, error)
}

type fakeCall struct {
	Method string
	Args   []any
}

type fakeJob struct {
	id       int64
	ops      []any
	status   string
	opstatus []any
	opresult []any
	log      [][]any
	prio     float64
	archived bool
}

// jobOutcome is how a job ends: status, the opcode's result (an encoded
// error for "error"), and log messages (strings, or [type, payload]).
type jobOutcome struct {
	status string
	result any
	logs   []any
}

// fakeEpoch is the fake clock: job times count from here.
const fakeEpoch = 1700000000

func startFake(ctx context.Context) (*fakeMaster, func(), error) {
	dir, err := os.MkdirTemp("", "clit")
	if err != nil {
		return nil, nil, err
	}
	f := &fakeMaster{
		sock:      filepath.Join(dir, "luxi.sock"),
		jobs:      map[int64]*fakeJob{},
		nextID:    1,
		instances: map[string]map[string]any{},
		nodes:     map[string]map[string]any{},
		handle:    map[string]func(context.Context, []any) (any, error){},
	}
	f.nodes["node1"] = map[string]any{"name": "node1", "dtotal": 102400.0, "dfree": 51200.0, "mtotal": 2048.0, "mnode": 100.0,
		"mfree": 1945.0, "pinst_cnt": 0.0, "sinst_cnt": 0.0, "pip": "192.0.2.1", "role": "M", "offline": false}
	f.nodes["node2"] = map[string]any{"name": "node2", "dtotal": nil, "dfree": nil, "mtotal": nil, "mnode": nil,
		"mfree": nil, "pinst_cnt": 0.0, "sinst_cnt": 0.0, "pip": "192.0.2.2", "role": "O", "offline": true}
	srv := luxi.NewServer(luxi.HandlerFunc(f.call), luxi.ServerOptions{Path: f.sock})
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx) }()
	select {
	case <-srv.Ready():
	case err := <-done:
		cancel()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	stop := func() {
		cancel()
		<-done
		os.RemoveAll(dir)
	}
	return f, stop, nil
}

func newFake(t *testing.T) *fakeMaster {
	t.Helper()
	f, stop, err := startFake(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return f
}

func (f *fakeMaster) dial(ctx context.Context) (*luxi.Client, error) { return luxi.Dial(ctx, f.sock) }

func (f *fakeMaster) call(ctx context.Context, method string, raw []json.RawMessage) (any, error) {
	args := make([]any, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &args[i]); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{method, args})
	h := f.handle[method]
	f.mu.Unlock()
	if h != nil {
		return h(ctx, args)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.builtin(method, args)
}

func argAt(args []any, i int) any {
	if i < len(args) {
		return args[i]
	}
	return nil
}

func (f *fakeMaster) builtin(method string, args []any) (any, error) {
	switch method {
	case "SubmitJob":
		if f.drained {
			return nil, ecode.New(ecode.JobQueueDrainErr, ecode.TempNoRes, "Job queue is drained, refusing job")
		}
		ops, _ := argAt(args, 0).([]any)
		return f.submit(ops), nil
	case "WaitForJobChange":
		j, err := f.job(argAt(args, 0))
		if err != nil {
			return nil, err
		}
		prev, hasPrev := argAt(args, 3).(float64)
		entries := [][]any{}
		for _, e := range j.log {
			if s := e[0].(float64); !hasPrev || s > prev {
				entries = append(entries, e)
			}
		}
		return []any{[]any{j.status}, entries}, nil
	case "QueryJobs":
		ids, _ := argAt(args, 0).([]any)
		fields := strs(argAt(args, 1))
		if len(ids) == 0 {
			for _, id := range slices.Sorted(maps.Keys(f.jobs)) {
				if !f.jobs[id].archived {
					ids = append(ids, float64(id))
				}
			}
		}
		rows := []any{}
		for _, id := range ids {
			j, err := f.job(id)
			if err != nil {
				rows = append(rows, nil)
				continue
			}
			row := []any{}
			for _, fl := range fields {
				row = append(row, j.field(fl))
			}
			rows = append(rows, row)
		}
		return rows, nil
	case "CancelJob":
		j, err := f.job(argAt(args, 0))
		if err != nil {
			return nil, err
		}
		return []any{false, fmt.Sprintf("Job %d is finished", j.id)}, nil
	case "ArchiveJob":
		j, err := f.job(argAt(args, 0))
		if err != nil {
			return false, nil
		}
		j.archived = true
		return true, nil
	case "AutoArchiveJobs":
		n := 0
		for _, j := range f.jobs {
			if !j.archived {
				j.archived = true
				n++
			}
		}
		return []any{n, 0}, nil
	case "ChangeJobPriority":
		j, err := f.job(argAt(args, 0))
		if err != nil {
			return nil, err
		}
		return []any{false, fmt.Sprintf("Job %d is finished", j.id)}, nil
	case "QueryInstances":
		return classicRows("Instance", f.instances, strs(argAt(args, 0)), strs(argAt(args, 1)))
	case "QueryNodes":
		return classicRows("Node", f.nodes, strs(argAt(args, 0)), strs(argAt(args, 1)))
	case "QueryClusterInfo":
		return map[string]any{"name": "cluster.example.com", "master": "node1", "candidate_pool_size": 10,
			"enabled_hypervisors": []string{"kvm", "fake"}, "beparams": map[string]any{"default": map[string]any{"maxmem": 128, "vcpus": 1}},
			"ctime": fakeEpoch, "volume_group_name": nil, "hidden_os": []string{}}, nil
	case "QueryConfigValues":
		out := []any{}
		for _, fl := range strs(argAt(args, 0)) {
			switch fl {
			case "drain_flag":
				out = append(out, f.drained)
			case "watcher_pause":
				out = append(out, f.pause)
			case "cluster_name":
				out = append(out, "cluster.example.com")
			default:
				return nil, ecode.Errorf(ecode.Inval, "Unknown configuration value '%s'", fl)
			}
		}
		return out, nil
	case "SetDrainFlag":
		f.drained, _ = argAt(args, 0).(bool)
		return true, nil
	case "SetWatcherPause":
		f.pause = argAt(args, 0)
		return f.pause, nil
	case "CreateJoinToken":
		node, _ := argAt(args, 0).(string)
		if _, ok := f.nodes[node]; ok {
			return nil, ecode.Errorf(ecode.Exists, "Node %s is already in the cluster", node)
		}
		return "corral1.token-for-" + node, nil
	case "DebugLocks":
		if f.locks == nil {
			return []any{}, nil
		}
		return f.locks, nil
	case "NotifyEvent":
		if ev, _ := argAt(args, 0).(string); strings.Contains(ev, " ") {
			return nil, ecode.Errorf(ecode.Inval, "event name %q: only printable ASCII characters other than space are allowed", ev)
		}
		return nil, nil
	}
	return nil, ecode.New(ecode.LuxiError, ecode.Inval, fmt.Sprintf("Unknown LUXI method %q", method))
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// classicRows answers QueryInstances and QueryNodes from objs.
func classicRows(kind string, objs map[string]map[string]any, names, fields []string) (any, error) {
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(objs))
	}
	rows := []any{}
	for _, n := range names {
		o, ok := objs[n]
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "%s '%s' not known", kind, n)
		}
		row := []any{}
		for _, fl := range fields {
			v, known := o[fl]
			if !known && fl != "name" {
				// Unset fields of known objects are unavailable values.
				v = nil
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (f *fakeMaster) job(v any) (*fakeJob, error) {
	id, ok := v.(float64)
	if !ok {
		return nil, ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job with id %v lost", v))
	}
	j, ok := f.jobs[int64(id)]
	if !ok {
		return nil, ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job with id %d lost", int64(id)))
	}
	return j, nil
}

func (f *fakeMaster) submit(ops []any) int64 {
	id := f.nextID
	f.nextID++
	op, _ := argAt(ops, 0).(map[string]any)
	var out jobOutcome
	if f.outcome != nil {
		out = f.outcome(op)
	} else {
		out = f.defaultOutcome(op)
	}
	j := &fakeJob{id: id, ops: ops, status: out.status, opstatus: []any{out.status}, opresult: []any{out.result}}
	if p, ok := op["priority"].(float64); ok {
		j.prio = p
	}
	for i, m := range out.logs {
		typ, payload := "message", m
		if l, ok := m.([]any); ok && len(l) == 2 {
			typ, payload = l[0].(string), l[1]
		}
		j.log = append(j.log, []any{float64(i + 1), []any{float64(fakeEpoch + id), float64(i)}, typ, payload})
	}
	f.jobs[id] = j
	return id
}

func (j *fakeJob) field(name string) any {
	ts := func(off int64) any { return []any{float64(fakeEpoch + j.id*10 + off), 0.0} }
	opID, _ := argAt(j.ops, 0).(map[string]any)["OP_ID"].(string)
	switch name {
	case "id":
		return float64(j.id)
	case "status":
		return j.status
	case "priority":
		return j.prio
	case "summary":
		return []any{opID[3:]}
	case "ops":
		return j.ops
	case "opstatus":
		return j.opstatus
	case "opresult":
		return j.opresult
	case "oplog":
		l := []any{}
		for _, e := range j.log {
			l = append(l, e)
		}
		return []any{l}
	case "received_ts":
		return ts(0)
	case "start_ts":
		return ts(1)
	case "end_ts":
		return ts(3)
	case "opstart":
		return []any{ts(1)}
	case "opexec":
		return []any{ts(2)}
	case "opend":
		return []any{ts(3)}
	}
	return nil
}

func encErr(kind ecode.Kind, class ecode.Class, msg string) any {
	return []any{string(kind), []any{msg, string(class)}}
}

func (f *fakeMaster) defaultOutcome(op map[string]any) jobOutcome {
	id, _ := op["OP_ID"].(string)
	name, _ := op["instance_name"].(string)
	ok := jobOutcome{status: "success"}
	fail := func(c ecode.Class, msg string) jobOutcome {
		return jobOutcome{status: "error", result: encErr(ecode.OpPrereqError, c, msg), logs: []any{"Checking prerequisites"}}
	}
	switch id {
	case "OP_TEST_DELAY":
		rep, _ := op["repeat"].(float64)
		for i := 0; i <= int(rep); i++ {
			ok.logs = append(ok.logs, fmt.Sprintf("Test delay: sleeping %v seconds", op["duration"]))
		}
	case "OP_INSTANCE_CREATE":
		if _, exists := f.instances[name]; exists {
			return fail(ecode.Exists, fmt.Sprintf("Instance '%s' is already in the cluster", name))
		}
		pnode, _ := op["pnode"].(string)
		if pnode == "" {
			pnode = "node1"
		}
		hv, _ := op["hypervisor"].(string)
		if hv == "" {
			hv = "kvm"
		}
		inst := map[string]any{"name": name, "os": op["os_type"], "hypervisor": hv, "pnode": pnode,
			"status": "ADMIN_down", "oper_ram": nil, "disk_template": op["disk_template"]}
		if op["start"] == true {
			inst["status"], inst["oper_ram"] = "running", 128.0
		}
		f.instances[name] = inst
		ok.result = []any{pnode}
		ok.logs = []any{"* creating instance disks...", "* running the instance OS create scripts...", []any{"remote-import", map[string]any{"x509_ca": "-"}}}
	case "OP_INSTANCE_REMOVE", "OP_INSTANCE_STARTUP", "OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REBOOT",
		"OP_INSTANCE_REINSTALL", "OP_INSTANCE_RENAME", "OP_INSTANCE_SET_PARAMS":
		inst, exists := f.instances[name]
		if !exists {
			return fail(ecode.NoEnt, fmt.Sprintf("Instance '%s' not known", name))
		}
		switch id {
		case "OP_INSTANCE_REMOVE":
			delete(f.instances, name)
		case "OP_INSTANCE_STARTUP":
			inst["status"], inst["oper_ram"] = "running", 128.0
		case "OP_INSTANCE_SHUTDOWN":
			inst["status"], inst["oper_ram"] = "ADMIN_down", nil
		case "OP_INSTANCE_SET_PARAMS":
			ok.result = paramChanges(op, "beparams", "be/", "hvparams", "hv/", "osparams", "os/")
		}
	case "OP_INSTANCE_QUERY_DATA":
		res := map[string]any{}
		for _, n := range strs(op["instances"]) {
			inst, exists := f.instances[n]
			if !exists {
				return fail(ecode.NoEnt, fmt.Sprintf("Instance '%s' not known", n))
			}
			res[n] = map[string]any{"name": n, "uuid": "u-" + n, "config_state": "up", "run_state": "up",
				"pnode": inst["pnode"], "pnode_group_uuid": "g-default", "pnode_group_name": "default",
				"snodes": []any{}, "snodes_group_uuids": []any{}, "snodes_group_names": []any{}, "os": inst["os"], "hypervisor": inst["hypervisor"],
				"network_port": nil, "disk_template": inst["disk_template"], "serial_no": 2.0, "ctime": float64(fakeEpoch),
				"mtime": float64(fakeEpoch + 60), "tags": []any{},
				"hv_instance": map[string]any{"acpi": false}, "hv_actual": map[string]any{"acpi": false, "kernel_path": "/boot/vmlinuz"},
				"be_instance": map[string]any{}, "be_actual": map[string]any{"maxmem": 128.0, "vcpus": 1.0},
				"os_instance": map[string]any{}, "os_actual": map[string]any{},
				"disks": []any{map[string]any{"iv_name": "disk/0", "size": 10240.0, "mode": "rw", "dev_type": "file"}},
				"nics":  []any{[]any{nil, "nic-uuid", nil, "aa:00:00:11:22:33", "bridged", "br0", "", nil, nil}},
				"extra": "kept"}
			if st, ok := inst["query_data_status"]; ok {
				res[n].(map[string]any)["status"] = st
			}
		}
		ok.result = res
	case "OP_CLUSTER_VERIFY":
		ok.result = map[string]any{"ok": true, "errors": 0.0, "warnings": 0.0, "messages": []any{}}
		ok.logs = []any{"Verify finished: 0 error(s), 0 warning(s)"}
	case "OP_NODE_SET_PARAMS":
		node, _ := op["node_name"].(string)
		if _, exists := f.nodes[node]; !exists {
			return fail(ecode.NoEnt, fmt.Sprintf("Node '%s' not known", node))
		}
		var ch []any
		for _, k := range []string{"master_candidate", "offline", "drained", "master_capable", "vm_capable"} {
			if v, set := op[k]; set {
				ch = append(ch, []any{k, fmt.Sprintf("%v", v)})
			}
		}
		ok.result = ch
	default:
		ok.logs = []any{"Running " + id}
	}
	return ok
}

// paramChanges lists [prefix+key, value] for the dicts of a modify opcode.
func paramChanges(op map[string]any, pairs ...string) []any {
	ch := []any{}
	for i := 0; i < len(pairs); i += 2 {
		m, _ := op[pairs[i]].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ch = append(ch, []any{pairs[i+1] + k, m[k]})
		}
	}
	return ch
}

// callsTo returns the recorded calls of a method.
func (f *fakeMaster) callsTo(method string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// submitted returns the opcodes of every SubmitJob call, in order.
func (f *fakeMaster) submitted() []map[string]any {
	var out []map[string]any
	for _, c := range f.callsTo("SubmitJob") {
		ops, _ := argAt(c.Args, 0).([]any)
		op, _ := argAt(ops, 0).(map[string]any)
		out = append(out, op)
	}
	return out
}

// runResult is what one CLI run produced.
type runResult struct {
	stdout, stderr string
	code           int
}

// run runs the CLI against f with a fixed clock and zone and no terminal.
func (f *fakeMaster) run(t *testing.T, args ...string) runResult {
	t.Helper()
	return f.runEnv(t, nil, args...)
}

func (f *fakeMaster) runEnv(t *testing.T, tweak func(*Env), args ...string) runResult {
	t.Helper()
	var out, errw bytes.Buffer
	env := f.env(&out, &errw)
	if tweak != nil {
		tweak(env)
	}
	code := Execute(context.Background(), NewRoot(env, nil, nil), args)
	return runResult{out.String(), errw.String(), code}
}

func (f *fakeMaster) env(out, errw *bytes.Buffer) *Env {
	return &Env{
		Stdout:     out,
		Stderr:     errw,
		Dial:       f.dial,
		Getenv:     func(string) string { return "" },
		Now:        func() time.Time { return time.Unix(fakeEpoch, 0) },
		Location:   time.UTC,
		IsTerminal: func(any) bool { return false },
	}
}

// mustJSON decodes a JSON literal the way values arrive from the wire.
func mustJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, s)
	}
	return v
}

// sameJSON compares got (after a JSON round trip) with the literal want.
func sameJSON(t *testing.T, got any, want string) bool {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, mustJSON(t, want))
}

func TestFakeMasterSanity(t *testing.T) {
	// The double itself must behave like corrald where the CLI relies on
	// it: unknown jobs are JobLost, unknown methods are LuxiError.
	f := newFake(t)
	c, err := f.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.WaitForJobChange(context.Background(), 99, []string{"status"}, nil, nil, 1)
	if e, ok := ecode.As(err); !ok || e.Kind != ecode.JobLost {
		t.Fatalf("WaitForJobChange on unknown job: %v", err)
	}
	err = c.Call(context.Background(), "NoSuchMethod", nil, nil)
	if e, ok := ecode.As(err); !ok || e.Kind != ecode.LuxiError {
		t.Fatalf("unknown method: %v", err)
	}
}

// jsonText renders v compactly for failure messages.
func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// callCount returns how many calls the master received.
func (f *fakeMaster) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}
