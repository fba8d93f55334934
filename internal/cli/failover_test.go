package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestMasterFailoverCommand(t *testing.T) {
	f := newFake(t)
	f.mu.Lock()
	f.handle["MasterFailover"] = func(_ context.Context, args []any) (any, error) {
		if to, _ := args[0].(string); to != "" {
			return "node1 handed the master role over to " + to, nil
		}
		return "node1 resigned; a master candidate takes over", nil
	}
	f.mu.Unlock()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "master-failover"}, "node1 resigned; a master candidate takes over\n"},
		{[]string{"cluster", "master-failover", "--to", "node2"}, "node1 handed the master role over to node2\n"},
	} {
		r := f.run(t, tc.args...)
		if r.code != 0 || r.stdout != tc.want {
			t.Fatalf("%q: %+v, want stdout %q", tc.args, r, tc.want)
		}
	}
	c := f.callsTo("MasterFailover")
	if len(c) != 2 || !sameJSON(t, c[0].Args, `[null]`) || !sameJSON(t, c[1].Args, `["node2"]`) {
		t.Fatalf("MasterFailover calls %v", c)
	}

	// A standby's answer reaches the operator as it is.
	msg := "this corrald is a standby; the master is node2 at /run/corral/master/luxi.sock"
	f.mu.Lock()
	f.handle["MasterFailover"] = func(context.Context, []any) (any, error) { return nil, ecode.Errorf(ecode.State, "%s", msg) }
	f.mu.Unlock()
	if r := f.run(t, "cluster", "master-failover"); r.code == 0 || !strings.Contains(r.stderr, msg) {
		t.Fatalf("failover on a standby: %+v", r)
	}
	if r := f.run(t, "cluster", "master-failover", "extra"); r.code == 0 {
		t.Fatalf("an extra argument was accepted: %+v", r)
	}
}
