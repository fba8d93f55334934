package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rapiCall runs one method of Ganeti's RAPI client (testdata/rapi/filters.py)
// and returns its result, or fails the test on an API error.
func (s *rapiServer) call(t *testing.T, method string, args ...any) any {
	t.Helper()
	res, apiErr := s.tryCall(t, method, args...)
	if apiErr != nil {
		t.Fatalf("%s%v: %v", method, args, apiErr)
	}
	return res
}

func (s *rapiServer) tryCall(t *testing.T, method string, args ...any) (any, map[string]any) {
	t.Helper()
	if args == nil {
		args = []any{}
	}
	a, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", filepath.Join(repoDir, "test/e2e/testdata/rapi/filters.py"), method, string(a))
	cmd.Env = s.vars
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s%v: %v\n%s", method, args, err, stderr.String())
	}
	var v struct {
		Result any            `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s%v output %q: %v", method, args, out, err)
	}
	return v.Result, v.Error
}

// delayOp is an OP_TEST_DELAY whose reason trail carries why, which the
// filters below match on.
func delayOp(seconds float64, why string) map[string]any {
	return map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": seconds,
		"reason": []any{[]any{"gnt:user", why, time.Now().UnixNano()}}}
}

// TestJobFilters drives the job filter rules through Ganeti's RAPI client
// and gnt-filter against a drop-in cluster: REJECT cancels a matching job,
// PAUSE holds one until the rule is deleted, RATE_LIMIT 1 runs matching
// jobs one at a time; and every query resource answers /2/query.
func TestJobFilters(t *testing.T) {
	requireRAPIClient(t)
	c := newDropinCluster(t, 0)
	s := devRAPI(t, c)
	checkRejectOverRAPI(t, c, s)
	checkPauseWithGntFilter(t, c)
	limitUUID := checkRateLimit(t, c, s)
	checkQueryResources(t, s, limitUUID)
	checkFilterCLI(t, c, s, limitUUID)
}

// submitOnly submits a one-op job without waiting for it.
func (c *cluster) submitOnly(op map[string]any) int64 {
	c.t.Helper()
	id, err := c.luxi.SubmitJob(context.Background(), []any{op})
	if err != nil {
		c.t.Fatalf("submit %v: %v", op, err)
	}
	return id
}

// waitJobStatus waits for a job to reach a status, failing the test if
// it ends in another.
func (c *cluster) waitJobStatus(id int64, want string) {
	c.t.Helper()
	waitFor(c.t, time.Minute, "job "+strconv.FormatInt(id, 10)+" to be "+want, func() bool {
		st := c.jobStatus(id)
		if st != want && (st == "success" || st == "error" || st == "canceled") {
			c.t.Fatalf("job %d ended %s, want %s", id, st, want)
		}
		return st == want
	})
}

// checkRejectOverRAPI adds a REJECT rule with Ganeti's RAPI client,
// checks it cancels a matching job only, reads and deletes it.
func checkRejectOverRAPI(t *testing.T, c *cluster, s *rapiServer) {
	submit, waitStatus := c.submitOnly, c.waitJobStatus
	preds := []any{[]any{"opcode", []any{"=", "OP_ID", "OP_TEST_DELAY"}}, []any{"reason", []any{"=", "reason", "reject me"}}}
	rejectUUID, _ := s.call(t, "AddFilter", 0, preds, "REJECT").(string)
	if !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(rejectUUID) {
		t.Fatalf("AddFilter returned %q", rejectUUID)
	}
	rejected := submit(delayOp(0, "reject me"))
	waitStatus(rejected, "canceled")
	if _, st, _ := c.submit(delayOp(0, "other")); st != "success" {
		t.Fatalf("a job the rule does not match ended %s", st)
	}
	rule, _ := s.call(t, "GetFilter", rejectUUID).(map[string]any)
	trail, _ := json.Marshal(rule["reason_trail"])
	if rule["action"] != "REJECT" || rule["priority"] != 0.0 || rule["uuid"] != rejectUUID ||
		!strings.Contains(string(trail), `"gnt:client"`) || !strings.Contains(string(trail), `"luxid"`) {
		t.Errorf("GetFilter: %v", rule)
	}
	if w, ok := rule["watermark"].(float64); !ok || int64(w) >= rejected {
		t.Errorf("watermark %v, want below job %d submitted after the rule", rule["watermark"], rejected)
	}
	if ids, _ := s.call(t, "GetFilters").([]any); !slices.Contains(ids, any(rejectUUID)) {
		t.Errorf("GetFilters: %v", ids)
	}
	s.call(t, "DeleteFilter", rejectUUID)
	if _, apiErr := s.tryCall(t, "GetFilter", rejectUUID); apiErr == nil || apiErr["code"] != 404.0 {
		t.Errorf("GetFilter of a deleted rule: %v", apiErr)
	}

}

// checkPauseWithGntFilter adds a PAUSE rule with gnt-filter, checks that
// it holds a matching job while others run, and that deleting it
// releases the job.
func checkPauseWithGntFilter(t *testing.T, c *cluster) {
	submit, waitStatus := c.submitOnly, c.waitJobStatus
	out := c.mustGnt("gnt-filter", "add", "--action=PAUSE", `--predicates=[["reason", ["=", "reason", "hold"]]]`)
	pauseUUID := strings.TrimSpace(out)
	held := submit(delayOp(0, "hold"))
	if _, st, _ := c.submit(delayOp(0, "other")); st != "success" {
		t.Fatalf("a job the PAUSE rule does not match ended %s", st)
	}
	if st := c.jobStatus(held); st != "queued" {
		t.Fatalf("held job is %s after a later job ran", st)
	}
	if out := c.mustGnt("gnt-job", "list", "--pending", "--no-headers", "-o", "id,status"); strings.TrimSpace(out) != strconv.FormatInt(held, 10)+" queued" {
		t.Errorf("gnt-job list --pending while a job is held: %q", out)
	}
	list := c.mustGnt("gnt-filter", "list", "--no-headers", "-o", "uuid,action,priority")
	if f := strings.Fields(list); len(f) != 3 || f[0] != pauseUUID || f[1] != "PAUSE" || f[2] != "0" {
		t.Errorf("gnt-filter list: %q", list)
	}
	if out := c.mustGnt("gnt-filter", "info", pauseUUID); !strings.Contains(out, "Action: PAUSE") || !strings.Contains(out, "UUID: "+pauseUUID) {
		t.Errorf("gnt-filter info:\n%s", out)
	}
	if out := c.mustGnt("gnt-filter", "list-fields", "--no-headers"); !strings.Contains(out, "reason_trail") || !strings.Contains(out, "watermark") {
		t.Errorf("gnt-filter list-fields:\n%s", out)
	}
	c.mustGnt("gnt-filter", "delete", pauseUUID)
	waitStatus(held, "success")
	if out, rc := c.gnt("gnt-filter", "list", pauseUUID); rc == 0 || !strings.Contains(out, "Filter uuid "+pauseUUID+" not found") {
		t.Errorf("gnt-filter list of a deleted rule: exit %d\n%s", rc, out)
	}

}

// checkRateLimit adds a RATE_LIMIT 1 rule with a uuid chosen by the
// client (ReplaceFilter creates it) and checks that the matching jobs ran
// one after another; it returns the rule's uuid.
func checkRateLimit(t *testing.T, c *cluster, s *rapiServer) string {
	submit, waitStatus, ctx := c.submitOnly, c.waitJobStatus, context.Background()
	const limitUUID = "6c0f3c4e-2b55-4e1e-8d0a-6a4bb8f0c001"
	if got := s.call(t, "ReplaceFilter", limitUUID, 0, []any{[]any{"reason", []any{"=", "reason", "one at a time"}}}, []any{"RATE_LIMIT", 1}); got != limitUUID {
		t.Fatalf("ReplaceFilter returned %v", got)
	}
	var limited []int64
	for range 3 {
		limited = append(limited, submit(delayOp(1, "one at a time")))
	}
	for _, id := range limited {
		waitStatus(id, "success")
	}
	rows, err := c.luxi.QueryJobs(ctx, limited, []string{"start_ts", "end_ts"})
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ start, end float64 }
	ts := func(v any) float64 {
		l, _ := v.([]any)
		if len(l) != 2 {
			t.Fatalf("timestamp %v", v)
		}
		return l[0].(float64) + l[1].(float64)/1e6
	}
	var spans []span
	for _, r := range rows {
		spans = append(spans, span{ts(r[0]), ts(r[1])})
	}
	slices.SortFunc(spans, func(a, b span) int { return int((a.start - b.start) * 1e6) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			t.Errorf("rate-limited jobs overlapped: %+v", spans)
		}
	}

	return limitUUID
}

// checkQueryResources asks every query resource over /2/query and
// /2/query/*/fields with Ganeti's RAPI client.
func checkQueryResources(t *testing.T, s *rapiServer, limitUUID string) {
	for res, fields := range map[string][]string{
		"instance": {"name"}, "node": {"name", "master"}, "group": {"name"}, "job": {"id", "status"},
		"os": {"name"}, "export": {"node", "export"}, "lock": {"name", "mode"}, "cluster": {"name"},
		"filter": {"uuid", "action", "watermark"},
	} {
		q, _ := s.call(t, "Query", res, fields).(map[string]any)
		defs, _ := q["fields"].([]any)
		if len(defs) != len(fields) {
			t.Errorf("Query %s: %v", res, q)
			continue
		}
		for _, d := range defs {
			if d.(map[string]any)["kind"] == "unknown" {
				t.Errorf("Query %s: unknown field %v", res, d)
			}
		}
		if fd, _ := s.call(t, "QueryFields", res).(map[string]any); len(fd["fields"].([]any)) < len(fields) {
			t.Errorf("QueryFields %s: %v", res, fd)
		}
	}
	q, _ := s.call(t, "Query", "filter", []string{"uuid", "action"}, []any{"=", "uuid", limitUUID}).(map[string]any)
	if data, _ := json.Marshal(q["data"]); string(data) != `[[[0,"`+limitUUID+`"],[0,["RATE_LIMIT",1]]]]` {
		t.Errorf("filtered filter query: %s", data)
	}
}

// checkFilterCLI drives corral filter, -F and list-fields, on the master
// and over RAPI (--rapi); the RATE_LIMIT rule limitUUID is in place.
func checkFilterCLI(t *testing.T, c *cluster, s *rapiServer, limitUUID string) {
	cli := func(args ...string) string {
		t.Helper()
		out, err := c.corral(args...)
		if err != nil {
			t.Fatalf("corral %v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := cli("filter", "list", "--no-headers", "-o", "uuid,action"); !strings.Contains(out, limitUUID+" RATE_LIMIT,1") {
		t.Errorf("corral filter list:\n%s", out)
	}
	rejectUUID := strings.TrimSpace(cli("filter", "add", "--action", "REJECT", "--predicates", `[["reason", ["=", "reason", "cli"]]]`, "--reason", "testing"))
	if out := cli("filter", "info", rejectUUID); !strings.Contains(out, "Action: REJECT") || !strings.Contains(out, `"gnt:user","testing"`) {
		t.Errorf("corral filter info:\n%s", out)
	}
	id, err := c.luxi.SubmitJob(context.Background(), []any{delayOp(0, "cli")})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the job to be rejected", func() bool { return c.jobStatus(id) == "canceled" })
	sid := strconv.FormatInt(id, 10)
	if out := cli("job", "list", "-F", `status == "canceled" and id >= `+sid, "-o", "id,status", "--no-headers"); strings.Fields(out)[0] != sid {
		t.Errorf("corral job list -F:\n%s", out)
	}
	if out := cli("job", "list", "--success", "-o", "status", "--no-headers"); strings.Contains(out, "canceled") || !strings.Contains(out, "success") {
		t.Errorf("corral job list --success:\n%s", out)
	}
	if out := cli("job", "list", sid, "-o", "id,status", "--no-headers"); strings.TrimSpace(out) != sid+" canceled" {
		t.Errorf("corral job list %s: %q", sid, out)
	}
	if out := cli("node", "list", "-F", "master and not offline", "-o", "name,master", "--no-headers"); len(strings.Fields(out)) != 2 || strings.Fields(out)[1] != "Y" {
		t.Errorf("corral node list -F: %q", out)
	}
	if out := cli("node", "list", "not master", "--no-headers"); strings.TrimSpace(out) != "" {
		t.Errorf("corral node list 'not master' (no other node): %q", out)
	}
	if out := cli("instance", "list-fields", "--no-headers"); !strings.Contains(out, "admin_state") {
		t.Errorf("corral instance list-fields:\n%s", out)
	}
	if out, err := c.corral("node", "list-fields", "name", "nosuch"); err == nil || !strings.Contains(out, "nosuch") {
		t.Errorf("list-fields of an unknown field: %v\n%s", err, out)
	}

	// The same over RAPI.
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(s.env.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "corral"), append([]string{"--rapi", s.env.URL, "--rapi-user", s.env.User,
			"--rapi-password-file", pw, "--rapi-ca", s.env.CA}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("corral --rapi %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := remote("filter", "info", rejectUUID); !strings.Contains(out, "UUID: "+rejectUUID) {
		t.Errorf("corral --rapi filter info:\n%s", out)
	}
	remote("filter", "delete", rejectUUID)
	if out := remote("filter", "list", "-o", "uuid", "--no-headers"); strings.TrimSpace(out) != limitUUID {
		t.Errorf("corral --rapi filter list after the delete: %q", out)
	}
	if out := strings.TrimSpace(remote("filter", "replace", limitUUID, "--action", "ACCEPT")); out != limitUUID {
		t.Errorf("corral --rapi filter replace: %q", out)
	}
	if out := cli("filter", "list", "-o", "action", "--no-headers", limitUUID); strings.TrimSpace(out) != "ACCEPT" {
		t.Errorf("after the replace: %q", out)
	}
}
