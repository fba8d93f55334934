package move

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// The source instance of the tests: two disks, one NIC, running.
func infoResult(name string) map[string]any {
	return map[string]any{name: map[string]any{
		"name": name, "config_state": "up", "run_state": "up", "os": "debootstrap+default",
		"hypervisor": "kvm", "disk_template": "file", "pnode": "sn1",
		"disks": []any{
			map[string]any{"iv_name": "disk/0", "size": 1024, "mode": "rw", "name": "root", "spindles": nil},
			map[string]any{"iv_name": "disk/1", "size": 512, "mode": "ro", "name": nil},
		},
		"nics":        []any{[]any{"eth0", "uuid-1", nil, "aa:00:00:11:22:33", "bridged", "br0", "", nil, nil}},
		"be_instance": map[string]any{"maxmem": 512},
		"hv_instance": map[string]any{"acpi": true},
		"os_instance": map[string]any{},
		"be_actual":   map[string]any{"maxmem": 512, "vcpus": 1},
	}}
}

var (
	testHandshake = []any{0, "hmac", "salt"}
	testKeyName   = []any{"x509-1-abc", "hmac2", "salt2"}
	srcCert       = "X-Ganeti-Signature: s/h\n\n-----BEGIN CERTIFICATE-----\nSRC\n-----END CERTIFICATE-----\n"
	dstCert       = "X-Ganeti-Signature: s/h\n\n-----BEGIN CERTIFICATE-----\nDST\n-----END CERTIFICATE-----\n"
	importDisks   = []any{[]any{"10.0.0.2", 40001, "m0", "h0", "s"}, []any{"10.0.0.2", 40002, "m1", "h0", "s"}}
)

// pair is a source and a destination fake with a move between them.
type pair struct {
	src, dst *fakeRAPI
	m        *Mover
	out      *bytes.Buffer
	// exported is closed when the source gets the export request.
	exported chan struct{}
	// srcPlan and dstPlan can replace single jobs; keys are "METHOD path".
	srcJobs, dstJobs map[string]func() *fakeJob
	mu               sync.Mutex
	sleeps           []time.Duration
}

func newPair(t *testing.T) *pair {
	p := &pair{src: newFakeRAPI(t), dst: newFakeRAPI(t), out: &bytes.Buffer{}, exported: make(chan struct{})}
	p.src.instances["web1"] = map[string]any{"name": "web1", "tags": []any{"env:prod"}}
	var once sync.Once
	p.srcJobs = map[string]func() *fakeJob{
		"GET /2/instances/web1/info": func() *fakeJob { return okJob(infoResult("web1"), msgStep("querying")) },
		"PUT /2/instances/web1/prepare-export": func() *fakeJob {
			return okJob(map[string]any{"handshake": testHandshake, "x509_key_name": testKeyName, "x509_ca": srcCert})
		},
		"DELETE /2/instances/web1/prepare-export": func() *fakeJob {
			return okJob(nil, msgStep("removing the transfer key"))
		},
		"PUT /2/instances/web1/export": func() *fakeJob {
			once.Do(func() { close(p.exported) })
			return okJob([]any{true, []any{true, true}}, msgStep("disk 0: sent 1024 MiB"), msgStep("disk 1: sent 512 MiB"))
		},
	}
	p.dstJobs = map[string]func() *fakeJob{
		"POST /2/instances?dry-run=1": func() *fakeJob { return okJob([]any{"dn1"}) },
		"POST /2/instances": func() *fakeJob {
			return okJob([]any{"dn1"}, msgStep("creating disks"),
				fakeStep{logs: [][2]any{{"remote-import", map[string]any{"disks": importDisks, "x509_ca": dstCert}}}},
				fakeStep{gate: p.exported, logs: [][2]any{{"message", "all disks imported"}}})
		},
	}
	plan := func(jobs *map[string]func() *fakeJob) func(r fakeReq) *fakeJob {
		return func(r fakeReq) *fakeJob {
			p.mu.Lock()
			defer p.mu.Unlock()
			if mk := (*jobs)[r.String()]; mk != nil && r.Query != "" {
				return mk()
			}
			if mk := (*jobs)[r.Method+" "+r.Path]; mk != nil {
				return mk()
			}
			return nil
		}
	}
	p.src.plan, p.dst.plan = plan(&p.srcJobs), plan(&p.dstJobs)
	p.m = &Mover{
		Src: p.src.cluster(t, "admin", "secret"), Dest: p.dst.cluster(t, "admin", "secret"),
		Out: p.out, Rand: func() float64 { return 1 }, CancelGrace: 5 * time.Second,
		Sleep: func(_ context.Context, d time.Duration) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.sleeps = append(p.sleeps, d)
			return nil
		},
	}
	return p
}

// calls drops the job polling from a request list.
func calls(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if !strings.HasPrefix(r, "GET /2/jobs/") {
			out = append(out, r)
		}
	}
	return out
}

func jsonEqual(t *testing.T, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	var gv any
	json.Unmarshal(g, &gv)
	if !reflect.DeepEqual(gv, w) {
		t.Errorf("got  %s\nwant %s", g, want)
	}
}

func TestFullMove(t *testing.T) {
	p := newPair(t)
	err := p.m.Move(context.Background(), Request{Instance: "web1",
		Overrides: Overrides{Compress: "zstd", BEParams: map[string]any{"vcpus": 2}, NICs: []map[string]any{{"link": "br1"}}}})
	if err != nil {
		t.Fatalf("Move: %v\n%s", err, p.out)
	}
	if got, want := calls(p.src.requests()), []string{
		"GET /version", "GET /2/instances/web1", "GET /2/instances/web1/info?static=1",
		"PUT /2/instances/web1/prepare-export?mode=remote", "PUT /2/instances/web1/export",
	}; !slices.Equal(got, want) {
		t.Errorf("source requests:\n%q\nwant\n%q", got, want)
	}
	if got, want := calls(p.dst.requests()), []string{"GET /version", "POST /2/instances"}; !slices.Equal(got, want) {
		t.Errorf("destination requests: %q, want %q", got, want)
	}
	// Every job was followed to its end and read back.
	for _, id := range []string{"101", "102", "103"} {
		if _, ok := p.src.request("GET", "/2/jobs/"+id); !ok {
			t.Errorf("source job %s not read back", id)
		}
	}
	create, _ := p.dst.request("POST", "/2/instances")
	jsonEqual(t, create.Body, `{
		"__version__": 1, "mode": "remote-import", "name": "web1", "disk_template": "file",
		"disks": [{"size": 1024, "mode": "rw", "name": "root"}, {"size": 512, "mode": "ro"}],
		"nics": [{"name": "eth0", "mac": "aa:00:00:11:22:33", "mode": "bridged", "link": "br1"}],
		"os": "debootstrap+default", "hypervisor": "kvm", "start": true,
		"ip_check": false, "name_check": false, "wait_for_sync": false,
		"source_handshake": [0, "hmac", "salt"], "source_x509_ca": `+mustQuote(srcCert)+`,
		"source_instance_name": "web1", "compress": "zstd",
		"beparams": {"maxmem": 512, "vcpus": 2}, "hvparams": {"acpi": true}, "osparams": {},
		"tags": ["env:prod"]}`)
	export, _ := p.src.request("PUT", "/2/instances/web1/export")
	jsonEqual(t, export.Body, `{
		"mode": "remote", "destination": [["10.0.0.2", 40001, "m0", "h0", "s"], ["10.0.0.2", 40002, "m1", "h0", "s"]],
		"shutdown": true, "remove_instance": true, "x509_key_name": ["x509-1-abc", "hmac2", "salt2"],
		"destination_x509_ca": `+mustQuote(dstCert)+`, "compress": "zstd"}`)
	out := p.out.String()
	for _, want := range []string{
		"[web1] source: disk 0: sent 1024 MiB\n", "[web1] source: disk 1: sent 512 MiB\n",
		"[web1] destination: creating disks\n", "[web1] destination: listening for 2 disk(s)\n",
		"[web1] destination: all disks imported\n", "[web1] moved to " + p.dst.srv.URL + " as web1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "BEGIN CERTIFICATE") {
		t.Errorf("output shows a certificate:\n%s", out)
	}
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestKeepSourceAndRename(t *testing.T) {
	p := newPair(t)
	err := p.m.Move(context.Background(), Request{Instance: "web1",
		Overrides: Overrides{DestName: "web1-new", KeepSource: true, PrimaryNode: "dn2", DiskTemplate: "plain"}})
	if err != nil {
		t.Fatalf("Move: %v\n%s", err, p.out)
	}
	create, _ := p.dst.request("POST", "/2/instances")
	b := create.Body.(map[string]any)
	if b["name"] != "web1-new" || b["source_instance_name"] != "web1" || b["pnode"] != "dn2" || b["disk_template"] != "plain" || b["compress"] != "none" {
		t.Errorf("create body %v", b)
	}
	export, _ := p.src.request("PUT", "/2/instances/web1/export")
	if export.Body.(map[string]any)["remove_instance"] != false {
		t.Errorf("export body %v: the source must be kept", export.Body)
	}
}

func TestDestinationFailureReports(t *testing.T) {
	p := newPair(t)
	p.dstJobs["POST /2/instances"] = func() *fakeJob {
		return failJob("OpPrereqError", "Instance 'web1' is already in the cluster", "already_exists", msgStep("checking"))
	}
	err := p.m.Move(context.Background(), Request{Instance: "web1"})
	var me *Error
	if !errors.As(err, &me) {
		t.Fatalf("Move: %v, want a move error", err)
	}
	if me.Src == nil || !errors.Is(me.Src, errAborted) {
		t.Errorf("source: %v, want aborted", me.Src)
	}
	if ecode.ClassOf(err) != ecode.Exists || !strings.Contains(err.Error(), "destination cluster: job 101: Instance 'web1' is already in the cluster") {
		t.Errorf("error %q (class %s)", err, ecode.ClassOf(err))
	}
	// Nothing was in flight on the source: no cancel, no export; the
	// prepared transfer key is given back.
	for _, r := range p.src.requests() {
		if strings.HasPrefix(r, "DELETE /2/jobs") || strings.Contains(r, "/export") && !strings.Contains(r, "prepare-export") {
			t.Errorf("source got %s after the destination failed", r)
		}
	}
	if rel, ok := p.src.request("DELETE", "/2/instances/web1/prepare-export"); !ok || rel.Body == nil {
		t.Errorf("the source's transfer key was not released: %q", p.src.requests())
	}
	// The clean-up job ran to its end: it was not canceled as part of
	// the failed move it cleans up after.
	if out := p.out.String(); !strings.Contains(out, "[web1] FAILED: moving web1 failed") ||
		!strings.Contains(out, "removed the transfer key of the failed move") {
		t.Errorf("output:\n%s", out)
	}
}

func TestSourceExportFailureCancelsDestination(t *testing.T) {
	p := newPair(t)
	never := make(chan struct{}) // the destination never gets the data
	p.dstJobs["POST /2/instances"] = func() *fakeJob {
		return okJob([]any{"dn1"},
			fakeStep{logs: [][2]any{{"remote-import", map[string]any{"disks": importDisks, "x509_ca": dstCert}}}},
			fakeStep{gate: never})
	}
	p.srcJobs["PUT /2/instances/web1/export"] = func() *fakeJob {
		return failJob("OpExecError", "Export of disk 1 failed: connection refused", "", msgStep("disk 0: sent"))
	}
	err := p.m.Move(context.Background(), Request{Instance: "web1"})
	var me *Error
	if !errors.As(err, &me) {
		t.Fatalf("Move: %v, want a move error", err)
	}
	if me.Src == nil || !strings.Contains(me.Src.Error(), "source cluster: job 103: Export of disk 1 failed") {
		t.Errorf("source error: %v", me.Src)
	}
	if me.Dest == nil || !strings.Contains(me.Dest.Error(), "job 101: the job was canceled (cancel: Job 101 canceled)") {
		t.Errorf("destination error: %v", me.Dest)
	}
	if !slices.Contains(p.dst.requests(), "DELETE /2/jobs/101") {
		t.Errorf("the destination job was not canceled: %q", p.dst.requests())
	}
	if slices.ContainsFunc(p.src.requests(), func(r string) bool { return strings.HasPrefix(r, "DELETE /2/jobs") }) {
		t.Errorf("the failed source job was canceled too: %q", p.src.requests())
	}
	if !slices.Contains(p.src.requests(), "DELETE /2/instances/web1/prepare-export") {
		t.Errorf("the source's transfer key was not released: %q", p.src.requests())
	}
}

func TestInstanceNotFound(t *testing.T) {
	p := newPair(t)
	err := p.m.Move(context.Background(), Request{Instance: "nope"})
	if ecode.ClassOf(err) != ecode.NoEnt || !strings.Contains(err.Error(), "source cluster: instance nope not found on "+p.src.srv.URL) {
		t.Errorf("Move(nope): %v", err)
	}
	if got := calls(p.dst.requests()); len(got) != 1 || got[0] != "GET /version" {
		t.Errorf("destination got %q", got)
	}
}

func TestWrongPasswordSaysWhichSide(t *testing.T) {
	p := newPair(t)
	p.m.Dest = p.dst.cluster(t, "admin", "wrong")
	err := p.m.Move(context.Background(), Request{Instance: "web1"})
	if err == nil || !strings.Contains(err.Error(), `destination cluster: authentication failed for user "admin" at `+p.dst.srv.URL) {
		t.Errorf("Move: %v", err)
	}
	if ecode.ClassOf(err) != ecode.Environ {
		t.Errorf("class %s, want environment error", ecode.ClassOf(err))
	}
}

func TestOpportunisticRetry(t *testing.T) {
	p := newPair(t)
	attempts := 0
	okCreate := p.dstJobs["POST /2/instances"]
	p.dstJobs["POST /2/instances"] = func() *fakeJob {
		attempts++
		if attempts <= 2 {
			return failJob("OpPrereqError", "Can't compute nodes using iallocator", "temp_insufficient_resources")
		}
		return okCreate()
	}
	p.m.OpportunisticTries, p.m.OpportunisticDelay = 3, 10*time.Second
	if err := p.m.Move(context.Background(), Request{Instance: "web1"}); err != nil {
		t.Fatalf("Move: %v\n%s", err, p.out)
	}
	opp := p.dst.opportunistic()
	if !reflect.DeepEqual(opp, []any{true, true, true}) {
		t.Errorf("opportunistic_locking of the attempts: %v", opp)
	}
	// Rand gives 1: the delay is varied up by 15%.
	if want := []time.Duration{11500 * time.Millisecond, 11500 * time.Millisecond}; !slices.Equal(p.sleeps, want) {
		t.Errorf("slept %v, want %v", p.sleeps, want)
	}
}

func TestOpportunisticLastAttemptIsOrdinary(t *testing.T) {
	p := newPair(t)
	p.dstJobs["POST /2/instances"] = func() *fakeJob {
		return failJob("OpPrereqError", "no room", "temp_insufficient_resources")
	}
	p.m.OpportunisticTries = 1
	err := p.m.Move(context.Background(), Request{Instance: "web1"})
	if ecode.ClassOf(err) != ecode.TempNoRes {
		t.Fatalf("Move: %v", err)
	}
	opp := p.dst.opportunistic()
	if !reflect.DeepEqual(opp, []any{true, nil}) || len(p.sleeps) != 1 {
		t.Errorf("attempts %v, sleeps %v; want one opportunistic, then one ordinary", opp, p.sleeps)
	}
}

func TestOtherFailuresAreNotRetried(t *testing.T) {
	p := newPair(t)
	p.dstJobs["POST /2/instances"] = func() *fakeJob {
		return failJob("OpPrereqError", "Hypervisor xen-pvm not enabled", "wrong_input")
	}
	p.m.OpportunisticTries = 3
	if err := p.m.Move(context.Background(), Request{Instance: "web1"}); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("Move: %v", err)
	}
	if len(p.sleeps) != 0 {
		t.Errorf("retried after a wrong-input failure: %v", p.sleeps)
	}
}

func TestMoveAllParallel(t *testing.T) {
	p := newPair(t)
	p.src.instances["web2"] = map[string]any{"name": "web2"}
	p.srcJobs["GET /2/instances/web2/info"] = func() *fakeJob { return okJob(infoResult("web2")) }
	p.srcJobs["PUT /2/instances/web2/prepare-export"] = p.srcJobs["PUT /2/instances/web1/prepare-export"]
	p.srcJobs["PUT /2/instances/web2/export"] = func() *fakeJob { return okJob([]any{true, []any{true, true}}) }
	p.m.Parallel = 2
	errs := p.m.MoveAll(context.Background(), []Request{{Instance: "web1"}, {Instance: "web2"}, {Instance: "gone"}})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "instance gone not found") {
		t.Fatalf("MoveAll: %v\n%s", errs, p.out)
	}
	for _, want := range []string{"[web1] moved to", "[web2] moved to", "[gone] FAILED"} {
		if !strings.Contains(p.out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, p.out)
		}
	}
}

func TestCheckExportResult(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
	}{
		{`[true, [true, true]]`, ""},
		{`[true, []]`, ""},
		{`[true, [true, false]]`, "disk(s) 1"},
		{`[false, [true]]`, "did not finish cleanly"},
		{`null`, "unexpected export result"},
		{`[true]`, "unexpected export result"},
	} {
		err := checkExportResult(json.RawMessage(tc.raw), 7)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkExportResult(%s): %v, want %q", tc.raw, err, tc.want)
		}
	}
}
