package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestInstancesMultiAlloc places instances together, as Ganeti's
// LUInstanceMultiAlloc does: Ganeti's own RAPI client posts to
// /2/instances-multi-alloc (a dry run first, which submits nothing), the
// built-in allocator places what fits, one creation job each follows, and
// an instance no node can hold comes back in "failed"; then over LUXI with
// the nodes given, and with a secret OS parameter that no job query shows;
// Ganeti's own gnt-instance batch-create runs it too (drop-in mode).
func TestInstancesMultiAlloc(t *testing.T) {
	requireRAPIClient(t)
	c := newDropinCluster(t, 1)
	s := devRAPI(t, c)
	script := filepath.Join(repoDir, "test/e2e/testdata/rapi/multialloc.py")
	py := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command("/usr/bin/python3", append([]string{script}, args...)...)
		cmd.Env = s.vars
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("multialloc.py %v: %v\n%s", args, err, stderr.String())
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("multialloc.py %v output %q: %v", args, out, err)
		}
		return v
	}
	result := func(r map[string]any) (jobs []any, allocatable, failed []string) {
		t.Helper()
		if r["status"] != "success" {
			t.Fatalf("multi-alloc job: %v", r)
		}
		res, _ := r["opresult"].([]any)
		m, _ := res[0].(map[string]any)
		jobs, _ = m["jobs"].([]any)
		for _, v := range m["allocatable"].([]any) {
			allocatable = append(allocatable, v.(string))
		}
		for _, v := range m["failed"].([]any) {
			failed = append(failed, v.(string))
		}
		sort.Strings(allocatable)
		return jobs, allocatable, failed
	}
	const huge = "ma3:50000000" // 50 TiB of memory: no node holds it

	jobs, alloc, failed := result(py("--dry-run", "ma1", "ma2", huge))
	if len(jobs) != 0 || !slices.Equal(alloc, []string{"ma1", "ma2"}) || !slices.Equal(failed, []string{"ma3"}) {
		t.Fatalf("dry run: jobs %v allocatable %v failed %v", jobs, alloc, failed)
	}
	if p := c.primaries(); len(p) != 0 {
		t.Fatalf("a dry run made instances %v", p)
	}
	r := py("ma1", "ma2", huge)
	jobs, alloc, failed = result(r)
	if len(jobs) != 2 || !slices.Equal(alloc, []string{"ma1", "ma2"}) || !slices.Equal(failed, []string{"ma3"}) {
		t.Fatalf("jobs %v allocatable %v failed %v", jobs, alloc, failed)
	}
	for id, st := range r["children"].(map[string]any) {
		if st != "success" {
			t.Errorf("creation job %s ended %v", id, st)
		}
	}
	nodes := c.nodeNames()
	prim := c.primaries()
	for _, n := range []string{"ma1", "ma2"} {
		if !slices.Contains(nodes, prim[n]) {
			t.Errorf("%s has primary %q, want one of %v", n, prim[n], nodes)
		}
	}
	if _, made := prim["ma3"]; made {
		t.Errorf("ma3 was created though the allocator could not place it")
	}

	// corral instance batch-create, as gnt-instance batch-create: a file
	// of creations, placed by the built-in allocator, then followed.
	file := filepath.Join(t.TempDir(), "batch.json")
	batch, _ := json.Marshal([]any{disklessOp("mc1", ""), disklessOp("mc2", "")})
	if err := os.WriteFile(file, batch, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := c.corral("instance", "batch-create", file); err != nil {
		t.Fatalf("batch-create: %v\n%s", err, out)
	}
	if p := c.primaries(); p["mc1"] == "" || p["mc2"] == "" {
		t.Errorf("batch-create made %v", p)
	}

	// Ganeti's own gnt-instance batch-create (drop-in mode) sends the op
	// over LUXI and follows the creation jobs.
	gfile := filepath.Join(t.TempDir(), "gnt-batch.json")
	gbatch, _ := json.Marshal([]any{map[string]any{"mode": "create", "instance_name": "md1", "disk_template": "diskless",
		"disks": []any{}, "nics": []any{map[string]any{}}, "os_type": "tiny+default", "hypervisor": "fake",
		"beparams": map[string]any{"memory": 128}, "start": false, "name_check": false, "ip_check": false}})
	if err := os.WriteFile(gfile, gbatch, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := c.mustGnt("gnt-instance", "batch-create", gfile); !strings.Contains(out, "All instances created successfully.") {
		t.Errorf("gnt-instance batch-create:\n%s", out)
	}
	if p := c.primaries(); p["md1"] == "" {
		t.Errorf("gnt-instance batch-create made %v", p)
	}

	// Over LUXI, with the nodes given: one job per instance on its node.
	// The secret OS parameter reaches the creation but no query.
	a, b := disklessOp("mb1", nodes[0]), disklessOp("mb2", nodes[1])
	a["osparams_secret"] = map[string]any{"marker": "multiallocsecretvalue"}
	res := c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "instances": []any{a, b}})
	m, _ := res[0].(map[string]any)
	children, _ := m["jobs"].([]any)
	if len(children) != 2 {
		t.Fatalf("result %v: want two jobs", res)
	}
	var ids []int64
	for _, j := range children {
		p := j.([]any)
		ids = append(ids, int64(p[1].(float64)))
	}
	for _, id := range ids {
		if st, res := c.waitJob(id, time.Minute); st != "success" {
			t.Fatalf("creation job %d: %s %v", id, st, res)
		}
	}
	prim = c.primaries()
	if prim["mb1"] != nodes[0] || prim["mb2"] != nodes[1] {
		t.Errorf("primaries %v, want mb1 on %s and mb2 on %s", prim, nodes[0], nodes[1])
	}
	rows, err := c.luxi.QueryJobs(context.Background(), nil, []string{"id", "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(rows); strings.Contains(string(b), "multiallocsecretvalue") {
		t.Errorf("a job query shows the secret OS parameter: %s", b)
	}
}
