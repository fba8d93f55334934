package cli

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

func TestJobFollowOutput(t *testing.T) {
	f := newFake(t)
	r := f.run(t, "instance", "add", "-t", "file", "-o", "debootstrap", "-s", "1G", "web1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// Job 1's entries are stamped fakeEpoch+1 (UTC), ANSI C style as
	// Ganeti's time.ctime; non-message entries show type and JSON.
	want := "Tue Nov 14 22:13:21 2023 * creating instance disks...\n" +
		"Tue Nov 14 22:13:21 2023 * running the instance OS create scripts...\n" +
		"Tue Nov 14 22:13:21 2023 remote-import: {\"x509_ca\":\"-\"}\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
	if r.stderr != "" {
		t.Fatalf("stderr: %q", r.stderr)
	}
	// The CLI followed the job the way Ganeti's poll loop does.
	waits := f.callsTo("WaitForJobChange")
	if len(waits) < 2 {
		t.Fatalf("%d WaitForJobChange calls", len(waits))
	}
	if !sameJSON(t, waits[0].Args, `[1, ["status"], null, null, 89]`) {
		t.Fatalf("first wait %v", waits[0].Args)
	}
	if !sameJSON(t, waits[1].Args[3], `3`) {
		t.Fatalf("second wait did not pass the last serial: %v", waits[1].Args)
	}
}

func TestSubmitOnly(t *testing.T) {
	f := newFake(t)
	r := f.run(t, "debug", "delay", "--submit", "5")
	if r.code != 0 || r.stdout != "JobID: 1\n" {
		t.Fatalf("got %+v", r)
	}
	if n := len(f.callsTo("WaitForJobChange")); n != 0 {
		t.Fatalf("--submit followed the job (%d waits)", n)
	}
	// The job can then be watched, with its log.
	r = f.run(t, "job", "watch", "1")
	want := "Output from job 1 follows\n" + strings.Repeat("-", 30) + "\nTue Nov 14 22:13:21 2023 Test delay: sleeping 5 seconds\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("watch: %+v\nwant stdout:\n%s", r, want)
	}
}

func TestJobErrorsAndExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(f *fakeMaster)
		args   []string
		code   int
		stderr string
	}{
		{"unknown instance", nil, []string{"instance", "remove", "-f", "nope"}, 3,
			"Failure: prerequisites not met for this operation:\nerror type: unknown_entity, error details:\nInstance 'nope' not known\n"},
		{"duplicate instance", withInstance("web1"), []string{"instance", "add", "-t", "file", "-o", "x", "-s", "1G", "web1"}, 4,
			"already in the cluster"},
		{"exec error", locked(func(f *fakeMaster) {
			f.outcome = func(map[string]any) jobOutcome {
				return jobOutcome{status: "error", result: []any{"OpExecError", []any{"disk full"}}}
			}
		}), []string{"debug", "delay", "1"}, 1, "Failure: command execution error:\ndisk full\n"},
		{"wrong state", locked(func(f *fakeMaster) {
			f.outcome = func(map[string]any) jobOutcome {
				return jobOutcome{status: "error", result: encErr(ecode.OpPrereqError, ecode.State, "Instance is running")}
			}
		}), []string{"debug", "delay", "1"}, 5, "error type: wrong_state"},
		{"canceled", locked(func(f *fakeMaster) {
			f.outcome = func(map[string]any) jobOutcome { return jobOutcome{status: "canceled"} }
		}), []string{"debug", "delay", "1"}, 1, "Job was canceled"},
		{"drained queue", locked(func(f *fakeMaster) { f.drained = true }), []string{"debug", "delay", "1"}, 6,
			"Failure: the job queue is marked for drain"},
		{"unknown node in list", nil, []string{"node", "list", "node9"}, 3, "Node 'node9' not known"},
		// Only OpPrereqError carries a class on the wire: other kinds are faults.
		{"unknown method", locked(func(f *fakeMaster) {
			f.handle["QueryClusterInfo"] = func(context.Context, []any) (any, error) {
				return nil, ecode.New(ecode.LuxiError, ecode.Inval, `Unknown LUXI method "QueryClusterInfo"`)
			}
		}), []string{"cluster", "info"}, 1, "Failure: LuxiError: Unknown LUXI method"},
		{"generic error", locked(func(f *fakeMaster) {
			f.handle["QueryClusterInfo"] = func(context.Context, []any) (any, error) { return nil, errors.New("boom") }
		}), []string{"cluster", "info"}, 1, "Failure: GenericError: boom"},
		{"token for existing node", nil, []string{"node", "join-token", "node1"}, 4, "already in the cluster"},
		{"watch unknown job", nil, []string{"job", "watch", "42"}, 3, "Failure: JobLost: Job with id 42 lost"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			r := f.run(t, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("stderr %q lacks %q", r.stderr, tc.stderr)
			}
		})
	}
}

// locked runs a fake's setup under its lock.
func locked(setup func(f *fakeMaster)) func(f *fakeMaster) {
	return func(f *fakeMaster) {
		f.mu.Lock()
		defer f.mu.Unlock()
		setup(f)
	}
}

func TestFormatErrorKinds(t *testing.T) {
	tests := []struct {
		err  error
		msg  string
		code int
	}{
		{ecode.New(ecode.JobQueueFull, ecode.TempNoRes, "full"), "Failure: the job queue is full", 6},
		{ecode.New(ecode.ParameterError, ecode.Inval, "duplicate key \"a\""), "Failure: invalid parameter: duplicate key \"a\"", 2},
		{ecode.New(ecode.OpCodeUnknown, ecode.Inval, "OP_X"), "Failure: unknown opcode: OP_X", 2},
		{&interruptedError{job: 4}, "Job 4 goes on running", 1},
		{context.Canceled, "Aborted.", 1},
		{errors.New("plain"), "Failure: plain", 1},
		{&exitError{code: 5, msg: "m"}, "m", 5},
	}
	for _, tc := range tests {
		msg, code := FormatError(tc.err)
		if code != tc.code || !strings.HasPrefix(msg, tc.msg) && !strings.Contains(msg, tc.msg) {
			t.Errorf("%v: got (%q, %d), want (%q..., %d)", tc.err, msg, code, tc.msg, tc.code)
		}
	}
}

func TestNodeList(t *testing.T) {
	f := newFake(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"node", "list"},
			"Node  DTotal DFree MTotal MNode MFree Pinst Sinst\n" +
				"node1 100.0G 50.0G   2.0G  100M  1.9G     0     0\n" +
				"node2      -     -      -     -     -     0     0\n"},
		{[]string{"node", "list", "--units", "m", "-o", "name,mfree,offline", "--no-headers"},
			"node1 1945 N\nnode2    - Y\n"},
		{[]string{"node", "list", "--separator", ":", "-o", "+pip", "node1"},
			"Node:DTotal:DFree:MTotal:MNode:MFree:Pinst:Sinst:PrimaryIP\n" +
				"node1:102400:51200:2048:100:1945:0:0:192.0.2.1\n"},
		{[]string{"node", "list", "--separator", "|", "--units", "h", "-o", "name,mtotal"},
			"Node|MTotal\nnode1|2.0G\nnode2|-\n"},
		{[]string{"node", "list", "-o", "name,role,unknownfield"},
			"Node  Role unknownfield\nnode1 M    -\nnode2 O    -\n"},
	}
	for _, tc := range tests {
		r := f.run(t, tc.args...)
		if r.code != 0 || r.stdout != tc.want {
			t.Errorf("%q: exit %d, stderr %q\n got:\n%s\nwant:\n%s", tc.args, r.code, r.stderr, r.stdout, tc.want)
		}
	}
	q := f.callsTo("QueryNodes")
	if !sameJSON(t, q[0].Args, `[[], ["name","dtotal","dfree","mtotal","mnode","mfree","pinst_cnt","sinst_cnt"], false]`) {
		t.Fatalf("QueryNodes args %v", q[0].Args)
	}
}

func TestInstanceList(t *testing.T) {
	f := newFake(t)
	withInstance("web1")(f)
	f.mu.Lock()
	f.instances["db1"] = map[string]any{"name": "db1", "os": "debootstrap+bookworm", "hypervisor": "kvm", "pnode": "node2",
		"status": "ADMIN_down", "oper_ram": nil}
	f.mu.Unlock()
	r := f.run(t, "instance", "list")
	want := "Instance Hypervisor OS                   Primary_node Status     Memory\n" +
		"db1      kvm        debootstrap+bookworm node2        ADMIN_down      -\n" +
		"web1     kvm        debootstrap          node1        running      128M\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d %s\n got:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	r = f.run(t, "instance", "list", "--no-headers", "-o", "name", "web1")
	if r.stdout != "web1\n" {
		t.Fatalf("names only: %q", r.stdout)
	}
}

func TestNodeInfoAndModify(t *testing.T) {
	f := newFake(t)
	r := f.run(t, "node", "info", "node1")
	for _, want := range []string{"Node name: node1\n", "  primary ip: 192.0.2.1\n", "  total memory: 2.0G\n", "  free disk: 50.0G\n",
		"  offline: false\n", "  secondary ip: -\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("node info lacks %q:\n%s", want, r.stdout)
		}
	}
	r = f.run(t, "node", "modify", "node1", "--drained", "yes", "--offline", "no")
	want := "Running OP_NODE_SET_PARAMS"
	if strings.Contains(r.stdout, want) {
		t.Fatalf("unexpected default log: %s", r.stdout)
	}
	if !strings.HasSuffix(r.stdout, "Modified node node1\n - offline -> false\n - drained -> true\n") {
		t.Fatalf("node modify output:\n%s", r.stdout)
	}
}

// TestNodeInfoStatus: a node's status shows as a block after its fields,
// and a node without one shows none.
func TestNodeInfoStatus(t *testing.T) {
	f := newFake(t)
	f.mu.Lock()
	f.nodes["node2"]["status"] = map[string]any{"last_error": "removing it from node node2: connection refused",
		"conditions": []any{map[string]any{"type": "DisksLeft", "status": "True", "reason": "RemovalFailed",
			"message": "1 disk(s) of instances no longer in the configuration wait for removal", "last_transition_time": float64(fakeEpoch)}}}
	f.mu.Unlock()
	r := f.run(t, "node", "info", "node1", "node2")
	want := `  serial number: -
  Status:
    Last error: removing it from node node2: connection refused
    Conditions:
      - DisksLeft: True (RemovalFailed) since 2023-11-14 22:13:20: 1 disk(s) of instances no longer in the configuration wait for removal
`
	if r.code != 0 || !strings.HasSuffix(r.stdout, want) {
		t.Fatalf("exit %d %s\n got:\n%s\nwant it to end in:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if strings.Count(r.stdout, "Status:") != 1 {
		t.Fatalf("node1 without a status shows one:\n%s", r.stdout)
	}
}

func TestJoinToken(t *testing.T) {
	f := newFake(t)
	r := f.run(t, "node", "join-token", "node3", "--ttl", "30m")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "corral1.token-for-node3\n") || !strings.Contains(r.stdout, "  corral-node join corral1.token-for-node3\n") {
		t.Fatalf("output:\n%s", r.stdout)
	}
	calls := f.callsTo("CreateJoinToken")
	if len(calls) != 1 || !sameJSON(t, calls[0].Args, `["node3", 1800]`) {
		t.Fatalf("calls %v", calls)
	}
	f.run(t, "node", "join-token", "node4")
	if calls = f.callsTo("CreateJoinToken"); !sameJSON(t, calls[1].Args, `["node4", 3600]`) {
		t.Fatalf("default ttl: %v", calls[1].Args)
	}
	f.run(t, "node", "join-token", "node5", "--ttl", "2d")
	if calls = f.callsTo("CreateJoinToken"); !sameJSON(t, calls[2].Args, `["node5", 172800]`) {
		t.Fatalf("2d ttl: %v", calls[2].Args)
	}
}

func TestInstanceInfo(t *testing.T) {
	f := newFake(t)
	withInstance("web1")(f)
	r := f.run(t, "instance", "info", "web1")
	want := `Instance name: web1
  UUID: u-web1
  Serial number: 2
  Creation time: 2023-11-14 22:13:20
  Modification time: 2023-11-14 22:14:20
  State: configured to be up, actual state is up
  Nodes:
    - primary: node1 (group default)
  Operating system: debootstrap
  Hypervisor: kvm
  Disk template: file
  Hypervisor parameters:
    acpi: false
    kernel_path: default (/boot/vmlinuz)
  Back-end parameters:
    maxmem: default (128)
    vcpus: default (1)
  OS parameters: (none)
  NICs:
    - nic/0: MAC: aa:00:00:11:22:33, IP: -, mode: bridged, link: br0
  Disks:
    - disk/0: file, size 10.0G, mode rw
  extra: kept
`
	if r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d %s\n got:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
}

// TestInstanceInfoStatus: an instance with a status (the watcher acted on
// it) shows it as a block after its tags.
func TestInstanceInfoStatus(t *testing.T) {
	f := newFake(t)
	withInstance("web1")(f)
	f.mu.Lock()
	f.instances["web1"]["query_data_status"] = map[string]any{"state": "down", "target": "up",
		"last_error": "restart job 12: Could not start instance",
		"conditions": []any{map[string]any{"type": "Running", "status": "False", "reason": "RestartGaveUp",
			"message": "did not stay up after 5 restarts", "last_transition_time": float64(fakeEpoch + 120)}}}
	f.mu.Unlock()
	r := f.run(t, "instance", "info", "web1")
	want := `    - disk/0: file, size 10.0G, mode rw
  Status: down (target up)
    Last error: restart job 12: Could not start instance
    Conditions:
      - Running: False (RestartGaveUp) since 2023-11-14 22:15:20: did not stay up after 5 restarts
  extra: kept
`
	if r.code != 0 || !strings.HasSuffix(r.stdout, want) {
		t.Fatalf("exit %d %s\n got:\n%s\nwant it to end in:\n%s", r.code, r.stderr, r.stdout, want)
	}
}

func TestInstanceModifyPrintsChanges(t *testing.T) {
	f := newFake(t)
	withInstance("web1")(f)
	r := f.run(t, "instance", "modify", "-B", "memory=1G", "web1")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "Modified instance web1\n - be/memory -> 1024\n") {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
}

func TestRemoveConfirmation(t *testing.T) {
	f := newFake(t)
	withInstance("web1")(f)
	r := f.run(t, "instance", "remove", "web1")
	if r.code != ExitError || !strings.Contains(r.stderr, "add -f") {
		t.Fatalf("without a terminal: %+v", r)
	}
	if len(f.submitted()) != 0 {
		t.Fatal("removed without confirmation")
	}
	terminal := func(answer string) func(*Env) {
		return func(e *Env) {
			e.Stdin = strings.NewReader(answer)
			e.IsTerminal = func(any) bool { return true }
		}
	}
	r = f.runEnv(t, terminal("n\n"), "instance", "remove", "web1")
	if r.code != ExitError || !strings.Contains(r.stderr, "Continue? y/[n]: ") || !strings.Contains(r.stderr, "Aborted.") {
		t.Fatalf("answer n: %+v", r)
	}
	if len(f.submitted()) != 0 {
		t.Fatal("removed after answer n")
	}
	r = f.runEnv(t, terminal("y\n"), "instance", "remove", "web1")
	if r.code != 0 || len(f.submitted()) != 1 {
		t.Fatalf("answer y: %+v", r)
	}
	r = f.run(t, "instance", "reinstall", "web1")
	if r.code != ExitError || len(f.submitted()) != 1 {
		t.Fatalf("reinstall without terminal or -f: %+v", r)
	}
}

// syncBuffer is a writer safe for the progress goroutine, which signals
// once its content contains a marker.
type syncBuffer struct {
	mu     sync.Mutex
	b      strings.Builder
	marker string
	seen   chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if s.seen != nil && strings.Contains(s.b.String(), s.marker) {
		close(s.seen)
		s.seen = nil
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestProgressLineOnTerminal(t *testing.T) {
	f := newFake(t)
	errw := &syncBuffer{marker: "Waiting for job 1", seen: make(chan struct{})}
	seen := errw.seen
	// The first wait answers only once the progress line has appeared, so
	// the test does not depend on timing.
	first := true
	f.mu.Lock()
	f.handle["WaitForJobChange"] = func(ctx context.Context, args []any) (any, error) {
		f.mu.Lock()
		wasFirst := first
		first = false
		f.mu.Unlock()
		if wasFirst {
			select {
			case <-seen:
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Second):
				return nil, errors.New("progress line never shown")
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.builtin("WaitForJobChange", args)
	}
	f.mu.Unlock()
	var out strings.Builder
	env := &Env{Stdout: &out, Stderr: errw, Dial: f.dial, Getenv: func(string) string { return "" },
		Location: time.UTC, IsTerminal: func(any) bool { return true },
		progressAfter: time.Millisecond, progressEvery: time.Millisecond}
	code := Execute(context.Background(), NewRoot(env, nil, nil), []string{"debug", "delay", "1"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
	if !strings.Contains(errw.String(), "\r\x1b[KWaiting for job 1 (") || !strings.HasSuffix(errw.String(), "\r\x1b[K") {
		t.Fatalf("stderr %q: no progress line, or not erased at the end", errw.String())
	}
	if !strings.Contains(out.String(), "Test delay") {
		t.Fatalf("stdout %q", out.String())
	}

	// Without a terminal there is no progress line.
	r := f.run(t, "debug", "delay", "1")
	if r.stderr != "" {
		t.Fatalf("progress without a terminal: %q", r.stderr)
	}
}

func TestInterruptedFollow(t *testing.T) {
	f := newFake(t)
	entered := make(chan struct{})
	f.mu.Lock()
	f.handle["WaitForJobChange"] = func(ctx context.Context, args []any) (any, error) {
		close(entered)
		<-ctx.Done() // the client goes away
		return nil, ctx.Err()
	}
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	var out, errw strings.Builder
	env := &Env{Stdout: &out, Stderr: &errw, Dial: f.dial, Getenv: func(string) string { return "" }, IsTerminal: func(any) bool { return false }}
	code := Execute(ctx, NewRoot(env, nil, nil), []string{"debug", "delay", "100"})
	if code != ExitError || !strings.Contains(errw.String(), "corral job watch 1") {
		t.Fatalf("exit %d, stderr %q", code, errw.String())
	}
}
