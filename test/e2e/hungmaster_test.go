package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/storecfg"
)

// TestRAPIAfterMasterKill: corral-rapi talks to the first corrald's socket,
// a standby that relays to the master; the master dies by SIGKILL while
// RAPI is polled. RAPI answers again within a second of the takeover and
// keeps answering (a connection the standby accepted while no master was
// elected must not stay a standby's for good).
func TestRAPIAfterMasterKill(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 1, Masters: 3, CorraldArgs: []string{"--election-ttl", failoverTTL}})
	cands := c.st.Candidates()
	first := c.leader(30 * time.Second)
	if first.Proc != cands[0].Proc {
		t.Fatalf("the first master is %s", first.Proc)
	}
	// Move the role away from the corrald corral-rapi talks to.
	target := cands[1]
	off := c.logSize(first.Proc)
	if out, err := c.corralAt(target.Socket, "cluster", "master-failover", "--to", target.Name); err != nil {
		t.Fatalf("master-failover: %v\n%s", err, out)
	}
	if got := c.leader(30 * time.Second); got.Proc != target.Proc {
		t.Fatalf("%s leads, want %s", got.Proc, target.Proc)
	}
	waitFor(t, 30*time.Second, first.Proc+" to stand by again", func() bool {
		return strings.Contains(c.logSince(first.Proc, off), "master term ended")
	})
	p, err := devcluster.StartRAPIProbe(c.st, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	waitFor(t, 30*time.Second, "RAPI to answer through the standby", p.AnyOK)

	killAt := time.Now()
	c.killDaemon(target.Proc)
	elected := c.leader(60 * time.Second)
	electedAt := time.Now()
	if elected.Proc == target.Proc {
		t.Fatalf("the killed %s leads", target.Proc)
	}
	var out devcluster.RAPIOutage
	waitFor(t, 30*time.Second, "RAPI to answer after the takeover", func() bool {
		out = p.Since(killAt)
		return out.Recovered()
	})
	okAt := out.OKAt
	if okAt.After(electedAt.Add(time.Second)) {
		t.Errorf("RAPI answered %v after the kill, %v after the new master answered: more than the takeover plus one second",
			okAt.Sub(killAt).Round(time.Millisecond), okAt.Sub(electedAt).Round(time.Millisecond))
	}
	// From then on it keeps answering.
	steady := okAt.Add(500 * time.Millisecond)
	time.Sleep(3 * time.Second)
	p.Stop()
	if after := p.Since(steady); after.Calls == 0 || after.Failed > 0 {
		t.Errorf("after RAPI recovered: %d of %d calls failed", after.Failed, after.Calls)
	}
	total := p.Since(killAt)
	t.Logf("SIGKILL of %s: %s elected and answering %v later; RAPI failed from %v to %v after the kill (%d of %d calls failed)",
		target.Name, elected.Name, electedAt.Sub(killAt).Round(time.Millisecond), out.FailAt.Sub(killAt).Round(time.Millisecond),
		okAt.Sub(killAt).Round(time.Millisecond), total.Failed, total.Calls)
}

// TestHungMasterDoesNotFlap freezes the master (SIGSTOP) for several
// election TTLs. One standby takes over and serves while its frozen
// predecessor still holds the shared join address, with no further
// election; every candidate keeps running; once resumed, the old master
// learns its term is over and stands by, and the new one binds the join
// address.
func TestHungMasterDoesNotFlap(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 1, Masters: 3, CorraldArgs: []string{"--election-ttl", failoverTTL}})
	cands := c.st.Candidates()
	first := c.leader(30 * time.Second)
	offs := map[string]int64{}
	for _, cand := range cands {
		offs[cand.Proc] = c.logSize(cand.Proc)
	}
	pid := c.proc(first.Proc).PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	stoppedAt := time.Now()

	elections := func() (n int, who devcluster.Candidate) {
		for _, cand := range cands[1:] {
			k := strings.Count(c.logSince(cand.Proc, offs[cand.Proc]), "elected master")
			n += k
			if k > 0 {
				who = cand
			}
		}
		return n, who
	}
	var second devcluster.Candidate
	waitFor(t, 60*time.Second, "a standby to take over from the frozen master", func() bool {
		n, who := elections()
		second = who
		return n > 0
	})
	waitFor(t, 30*time.Second, second.Proc+" to serve as master", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl, err := luxi.Dial(ctx, second.Socket)
		if err != nil {
			return false
		}
		defer cl.Close()
		_, err = cl.QueryClusterInfo(ctx)
		return err == nil
	})
	c.useMaster(second)
	c.mustSucceed(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0})
	// Several TTLs later: still that one master, still every process.
	time.Sleep(4 * 3 * time.Second)
	if n, _ := elections(); n != 1 {
		c.dumpLogs()
		t.Fatalf("%d elections while the master was frozen %v, want 1", n, time.Since(stoppedAt).Round(time.Second))
	}
	for _, cand := range cands {
		if gone(c.proc(cand.Proc).PID) {
			t.Fatalf("%s exited while the master was frozen", cand.Proc)
		}
	}
	if !strings.Contains(c.logSince(second.Proc, offs[second.Proc]), "join listener: address in use") {
		t.Errorf("%s did not say the join address was held", second.Proc)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0})

	resume()
	waitFor(t, 30*time.Second, "the resumed master to stand by", func() bool {
		return strings.Contains(c.logSince(first.Proc, offs[first.Proc]), "master term ended")
	})
	waitFor(t, 30*time.Second, "the new master to bind the join address", func() bool {
		return strings.Contains(c.logSince(second.Proc, offs[second.Proc]), "join listener: listening now")
	})
	if gone(pid) {
		t.Fatal("the resumed master exited")
	}
	if got := c.leader(30 * time.Second); got.Proc != second.Proc {
		t.Fatalf("%s leads after the old master resumed, want %s", got.Proc, second.Proc)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0})
}
