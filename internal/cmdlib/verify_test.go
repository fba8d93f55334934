package cmdlib

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/store"
)

func TestVerifyCandidatePool(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	p := &Processor{Cfg: e.cfg}
	lu := &clusterVerifyLU{}
	lu.verifyCandidates(p)
	if lu.Warnings != 0 {
		t.Fatalf("one capable node, one candidate: %v", lu.Messages)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"}); st != "success" {
		t.Fatalf("node add: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n2", "master_candidate": false}); st != "success" {
		t.Fatalf("demote: %s %v", st, res)
	}
	lu = &clusterVerifyLU{}
	lu.verifyCandidates(p)
	if lu.Warnings != 1 || !strings.Contains(lu.Messages[0], "1 master candidate(s), 2 wanted") {
		t.Fatalf("a capable node demoted below the pool size: %v", lu.Messages)
	}
}

func TestVerifyStoreMembers(t *testing.T) {
	member := func(name string, healthy, leader bool) store.MemberHealth {
		m := store.MemberHealth{Name: name, Endpoint: "https://" + name + ":2379", Healthy: healthy, Leader: leader}
		if !healthy {
			m.Err = "connection refused"
		}
		return m
	}
	for _, tc := range []struct {
		name             string
		members          []store.MemberHealth
		err              error
		errors, warnings int
		want             string
	}{
		{"all healthy", []store.MemberHealth{member("m0", true, true), member("m1", true, false), member("m2", true, false)}, nil, 0, 0, ""},
		{"one down", []store.MemberHealth{member("m0", true, true), member("m1", false, false), member("m2", true, false)}, nil, 1, 0, "m1"},
		{"no quorum", []store.MemberHealth{member("m0", true, false), member("m1", false, false), member("m2", false, false)}, nil, 3, 0, "no quorum"},
		{"two leaders", []store.MemberHealth{member("m0", true, true), member("m1", true, true), member("m2", true, false)}, nil, 1, 0, "2 etcd members say they lead"},
		{"single member", []store.MemberHealth{member("m0", true, true)}, nil, 0, 1, "cannot lose a machine"},
		{"unreachable", nil, errors.New("context deadline exceeded"), 1, 0, "cannot list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Processor{StoreHealth: func(context.Context) ([]store.MemberHealth, error) { return tc.members, tc.err }}
			lu := &clusterVerifyLU{}
			lu.verifyStore(context.Background(), p)
			if lu.Errors != tc.errors || lu.Warnings != tc.warnings {
				t.Fatalf("%d errors, %d warnings, want %d, %d: %v", lu.Errors, lu.Warnings, tc.errors, tc.warnings, lu.Messages)
			}
			if tc.want != "" && !strings.Contains(strings.Join(lu.Messages, "\n"), tc.want) {
				t.Fatalf("messages %v lack %q", lu.Messages, tc.want)
			}
		})
	}
}

// TestClockSkewSaturates: a node reporting an absurd time is skewed; the
// unsaturated conversion used to wrap it to a negative skew, which passed.
func TestClockSkewSaturates(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, nodeTime := range []float64{1e308, -1e308, 1e12, 0} {
		if skew := clockSkew(now, nodeTime); skew <= maxClockSkew {
			t.Errorf("node time %v: skew %v, want more than %v", nodeTime, skew, maxClockSkew)
		}
	}
	if skew := clockSkew(now, 1_800_000_001.5); skew != 1500*time.Millisecond {
		t.Errorf("skew %v, want 1.5s", skew)
	}
}

// TestVerifyResultForGanetiClient: Ganeti's gnt-cluster verify reads the
// result's "jobs" list and exits 1 when an entry is not a success; errors
// found must show there, and a clean cluster must list nothing.
func TestVerifyResultForGanetiClient(t *testing.T) {
	clean := (&clusterVerifyLU{}).Result().(map[string]any)
	if jobs, ok := clean["jobs"].([]any); !ok || len(jobs) != 0 {
		t.Fatalf("clean verify: jobs %#v, want an empty list", clean["jobs"])
	}
	lu := &clusterVerifyLU{}
	lu.errf("node %s: down", "n2")
	lu.warnf("just a warning")
	res := lu.Result().(map[string]any)
	jobs, _ := res["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("verify with an error: jobs %#v, want one failed entry", res["jobs"])
	}
	entry, _ := jobs[0].([]any)
	if len(entry) != 2 || entry[0] != false || !strings.Contains(entry[1].(string), "1 error(s)") {
		t.Fatalf("failed entry %#v, want [false, message naming the errors]", jobs[0])
	}
	if res["ok"] != false || res["errors"] != 1 {
		t.Fatalf("Corral's keys changed: %v", res)
	}
}
