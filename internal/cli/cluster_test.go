package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestClusterInfo(t *testing.T) {
	f := newFake(t)
	r := f.run(t, "cluster", "info")
	want := `beparams:
  default:
    maxmem: 128
    vcpus: 1
candidate_pool_size: 10
ctime: 2023-11-14 22:13:20
enabled_hypervisors: kvm, fake
hidden_os: (none)
master: node1
name: cluster.example.com
volume_group_name: -
`
	if r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d %s\n got:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	r = f.run(t, "cluster", "info", "--json")
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m["name"] != "cluster.example.com" {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
}

func TestClusterVerify(t *testing.T) {
	f := newFake(t)
	r := f.run(t, "cluster", "verify")
	// The result's messages are printed, not the log that repeats them.
	if r.code != 0 || r.stdout != "Verify finished: 0 error(s), 0 warning(s)\n" {
		t.Fatalf("clean verify: %+v", r)
	}
	f.mu.Lock()
	f.outcome = func(map[string]any) jobOutcome {
		return jobOutcome{status: "success", logs: []any{"E: node node2: unreachable"},
			result: map[string]any{"ok": false, "errors": 1, "warnings": 1,
				"messages": []any{"E: node node2: unreachable", "W: node node1: certificate expires in 10 days"}}}
	}
	f.mu.Unlock()
	r = f.run(t, "cluster", "verify")
	want := "E: node node2: unreachable\nW: node node1: certificate expires in 10 days\nVerify finished: 1 error(s), 1 warning(s)\n"
	if r.code != 1 || r.stdout != want || r.stderr != "" {
		t.Fatalf("failed verify: %+v", r)
	}
}

func TestClusterQueueAndWatcher(t *testing.T) {
	f := newFake(t)
	steps := []struct {
		args []string
		out  string
	}{
		{[]string{"cluster", "queue", "info"}, "The drain flag is unset\n"},
		{[]string{"cluster", "queue", "drain"}, ""},
		{[]string{"cluster", "queue", "info"}, "The drain flag is set\n"},
		{[]string{"cluster", "queue", "undrain"}, ""},
		{[]string{"cluster", "queue", "info"}, "The drain flag is unset\n"},
		{[]string{"cluster", "watcher", "info"}, "The watcher is not paused.\n"},
		{[]string{"cluster", "watcher", "pause", "1h"}, "The watcher is paused until 2023-11-14 23:13:20.\n"},
		{[]string{"cluster", "watcher", "info"}, "The watcher is paused until 2023-11-14 23:13:20.\n"},
		{[]string{"cluster", "watcher", "continue"}, "The watcher is no longer paused.\n"},
		{[]string{"cluster", "watcher", "info"}, "The watcher is not paused.\n"},
	}
	for _, s := range steps {
		r := f.run(t, s.args...)
		if r.code != 0 || r.stdout != s.out {
			t.Fatalf("%q: %+v, want stdout %q", s.args, r, s.out)
		}
	}
	if c := f.callsTo("SetDrainFlag"); len(c) != 2 || c[0].Args[0] != true || c[1].Args[0] != false {
		t.Fatalf("SetDrainFlag calls %v", c)
	}
	c := f.callsTo("SetWatcherPause")
	if len(c) != 2 || !sameJSON(t, c[0].Args, `[1700003600]`) || !sameJSON(t, c[1].Args, `[null]`) {
		t.Fatalf("SetWatcherPause calls %v", c)
	}
}

func TestJobCommands(t *testing.T) {
	f := newFake(t)
	f.mu.Lock()
	f.outcome = func(op map[string]any) jobOutcome {
		if op["duration"] == 2.0 {
			return jobOutcome{status: "error", result: []any{"OpExecError", []any{"interrupted"}}, logs: []any{"sleeping"}}
		}
		return jobOutcome{status: "success", logs: []any{"sleeping"}}
	}
	f.mu.Unlock()
	for _, d := range []string{"1", "2", "3"} {
		if r := f.run(t, "debug", "delay", "--submit", d); r.code != 0 {
			t.Fatalf("submit: %+v", r)
		}
	}
	r := f.run(t, "job", "list")
	want := "ID Status  Summary\n 1 success TEST_DELAY\n 2 error   TEST_DELAY\n 3 success TEST_DELAY\n"
	if r.stdout != want {
		t.Fatalf("job list:\n%s\nwant:\n%s", r.stdout, want)
	}
	if c := f.callsTo("QueryJobs"); !sameJSON(t, c[0].Args, `[[], ["id","status","summary"]]`) {
		t.Fatalf("QueryJobs args %v", c[0].Args)
	}
	r = f.run(t, "job", "list", "--error", "-o", "id,start_ts", "--no-headers")
	if r.stdout != "2 2023-11-14 22:13:41\n" {
		t.Fatalf("job list --error: %q", r.stdout)
	}
	r = f.run(t, "job", "list", "--finished", "-o", "id", "--no-headers", "--separator", ",")
	if r.stdout != "1\n2\n3\n" {
		t.Fatalf("job list --finished: %q", r.stdout)
	}
	r = f.run(t, "job", "list", "--running")
	if r.stdout != "ID Status Summary\n" {
		t.Fatalf("job list --running: %q", r.stdout)
	}

	r = f.run(t, "job", "watch", "2")
	if r.code != 1 || !strings.Contains(r.stderr, "interrupted") || !strings.Contains(r.stdout, "sleeping") {
		t.Fatalf("watch failed job: %+v", r)
	}

	r = f.run(t, "job", "info", "2")
	for _, want := range []string{
		"Job ID: 2\n  Status: error\n  Priority: 0\n",
		"  Received:         2023-11-14 22:13:40.000000\n",
		"  Total processing time: 2s\n",
		"    - OP_TEST_DELAY\n      Status: error\n",
		"      Input fields:\n        duration: 2\n",
		"      Result:\n        - OpExecError\n        - interrupted\n",
		"      Execution log:\n        Tue Nov 14 22:13:22 2023 sleeping\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("job info lacks %q:\n%s", want, r.stdout)
		}
	}
	r = f.run(t, "job", "info", "1", "9")
	if r.code != 3 || !strings.Contains(r.stdout, "Job ID: 1") || !strings.Contains(r.stderr, "not found: 9") {
		t.Fatalf("job info with unknown: %+v", r)
	}

	r = f.run(t, "job", "cancel", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "Job 1 is finished") {
		t.Fatalf("cancel finished job: %+v", r)
	}
	if c := f.callsTo("CancelJob"); !sameJSON(t, c[0].Args, `[1, false]`) {
		t.Fatalf("CancelJob args %v", c[0].Args)
	}
	f.run(t, "job", "cancel", "--kill", "1")
	if c := f.callsTo("CancelJob"); !sameJSON(t, c[1].Args, `[1, true]`) {
		t.Fatalf("CancelJob --kill args %v", c[1].Args)
	}
	r = f.run(t, "job", "change-priority", "3", "--priority", "high")
	if r.code != 1 {
		t.Fatalf("change-priority: %+v", r)
	}
	if c := f.callsTo("ChangeJobPriority"); !sameJSON(t, c[0].Args, `[3, -10]`) {
		t.Fatalf("ChangeJobPriority args %v", c[0].Args)
	}

	if r = f.run(t, "job", "archive", "1"); r.code != 0 {
		t.Fatalf("archive: %+v", r)
	}
	r = f.run(t, "job", "archive", "9")
	if r.code != 1 || !strings.Contains(r.stderr, "could not archive job(s) 9") {
		t.Fatalf("archive unknown: %+v", r)
	}
	r = f.run(t, "job", "list", "-o", "id", "--no-headers")
	if r.stdout != "2\n3\n" {
		t.Fatalf("archived job still listed: %q", r.stdout)
	}
	for _, tc := range []struct {
		arg  string
		want string
	}{{"all", `[-1, 89]`}, {"-1", `[-1, 89]`}, {"6h", `[21600, 89]`}, {"90", `[90, 89]`}} {
		args := []string{"job", "autoarchive", tc.arg}
		if tc.arg == "-1" {
			args = []string{"job", "autoarchive", "--", "-1"}
		}
		r = f.run(t, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Archived ") {
			t.Fatalf("autoarchive %s: %+v", tc.arg, r)
		}
		c := f.callsTo("AutoArchiveJobs")
		if !sameJSON(t, c[len(c)-1].Args, tc.want) {
			t.Fatalf("autoarchive %s: args %v, want %s", tc.arg, c[len(c)-1].Args, tc.want)
		}
	}
}

func TestDebugLocks(t *testing.T) {
	f := newFake(t)
	f.mu.Lock()
	f.locks = []any{
		map[string]any{"Name": "cluster/BGL", "Mode": "shared", "Owners": []any{"job/3", "job/4"}, "Pending": []any{
			map[string]any{"Owner": "job/5", "Mode": "exclusive", "Priority": -10}}},
		map[string]any{"Name": "instance/web1", "Mode": "", "Owners": nil, "Pending": []any{
			map[string]any{"Owner": "job/6", "Mode": "shared", "Priority": 0},
			map[string]any{"Owner": "job/7", "Mode": "exclusive", "Priority": 0}}},
	}
	f.mu.Unlock()
	r := f.run(t, "debug", "locks")
	want := "Name          Mode   Owner       Pending\n" +
		"cluster/BGL   shared job/3,job/4 job/5:exclusive@-10\n" +
		"instance/web1 -      -           job/6:shared@0,job/7:exclusive@0\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d %s\n got:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	r = f.run(t, "debug", "locks", "--no-headers", "--separator", "|")
	if !strings.HasPrefix(r.stdout, "cluster/BGL|shared|job/3,job/4|job/5:exclusive@-10\n") {
		t.Fatalf("separator: %q", r.stdout)
	}
}

func TestDebugNotify(t *testing.T) {
	f := newFake(t)
	if r := f.run(t, "debug", "notify", "agent/7/called-back"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	calls := f.callsTo("NotifyEvent")
	if len(calls) != 1 || !sameJSON(t, calls[0].Args, `["agent/7/called-back"]`) {
		t.Fatalf("NotifyEvent calls %+v", calls)
	}
	if r := f.run(t, "debug", "notify", "bad name"); r.code == 0 || !strings.Contains(r.stderr, "printable ASCII") {
		t.Fatalf("a refused event: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := f.run(t, "debug", "notify"); r.code == 0 {
		t.Fatal("notify without an event succeeded")
	}
}
