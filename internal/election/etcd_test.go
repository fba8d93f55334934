package election

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/store"
)

// raftFollower returns a member of c that is not the raft leader.
func raftFollower(t testing.TB, c *etcdproc.Cluster) (follower *etcdproc.Member, others []string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := ctxT(t, waitLimit)
	for _, m := range c.Members {
		st, err := cli.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if follower == nil && st.Leader != st.Header.MemberId {
			follower = m
			continue
		}
		others = append(others, m.ClientURL)
	}
	if follower == nil {
		t.Fatal("no follower among the members")
	}
	return follower, others
}

// TestPartitionedOldMaster runs on three etcd members. The leader talks to
// one member only, a raft follower, which is then frozen (SIGSTOP): the
// leader's calls hang as in a network partition. A write it issues while
// it still believes it leads hangs with them. It must step down before the
// other candidate, talking to the other two members, wins; and when the
// frozen member resumes, the stale write must be refused and change
// nothing.
func TestPartitionedOldMaster(t *testing.T) {
	etcdtest.Require(t)
	c := etcdtest.Start(t, etcdproc.Config{Members: 3})
	frozen, others := raftFollower(t, c)
	prefix := newPrefix()
	sa := openEtcd(t, []string{frozen.ClientURL}, prefix)
	sb := openEtcd(t, others, prefix)
	ctx := ctxT(t, 4*waitLimit)
	const ttl = 3 * time.Second

	a := campaignT(t, newT(t, Config{Store: sa, Name: "a", TTL: ttl}))
	fsa := Fenced(sa, a)
	mustTxn(t, fsa, nil, []store.Op{store.Put("/d/x", []byte("a1"))}, nil)
	bres := campaignAsync(t, ctx, newT(t, Config{Store: sb, Name: "b", TTL: ttl}))

	pid := frozen.PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The signal takes effect asynchronously; a write that got in before
	// would be a write of a's term, not a stale one.
	waitStopped(t, pid)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("resuming member %s: %v", frozen.Name, err)
			}
		}
	}
	t.Cleanup(resume)
	cut := time.Now()

	if err := a.Err(); err != nil {
		t.Fatalf("a lost its term before the stale write: %v", err)
	}
	type staleResult struct {
		res store.TxnResult
		err error
	}
	stale := make(chan staleResult, 1)
	go func() {
		res, err := fsa.Txn(ctx, nil, []store.Op{store.Put("/d/x", []byte("a2"))}, nil)
		stale <- staleResult{res, err}
	}()

	if err := awaitDone(t, a, "a"); !errors.Is(err, ErrDeposed) {
		t.Fatalf("a's term ended with %v, want ErrDeposed", err)
	}
	steppedDown := time.Since(cut)
	bt := awaitWin(t, bres, "b")
	select {
	case <-a.Done():
	default:
		t.Fatal("b won while a still believed it led")
	}
	mustTxn(t, Fenced(sb, bt), nil, []store.Op{store.Put("/d/x", []byte("b1"))}, nil)
	t.Logf("a stepped down %v after the cut, b won %v after it", steppedDown.Round(time.Millisecond), time.Since(cut).Round(time.Millisecond))

	resume()
	select {
	case r := <-stale:
		t.Logf("the stale write returned: %+v, %v", r.res, r.err)
		switch {
		case r.err == nil && r.res.Revision >= bt.Token:
			t.Fatalf("the deposed leader's write committed at revision %d, in b's term %d", r.res.Revision, bt.Token)
		case r.err == nil:
			t.Errorf("the write committed at revision %d, in a's term, although a's member was frozen", r.res.Revision)
		case !isFenced(r.err):
			// The resumed member may also drop the request (its raft
			// term is stale); then nothing was applied either, as the
			// value read below shows.
			t.Logf("the stale write was dropped rather than fenced")
		}
	case <-time.After(2 * waitLimit):
		t.Fatal("the stale write did not return after the member resumed")
	}
	// Read through the resumed member too: it must have caught up with b.
	for _, s := range []store.Store{sb, sa} {
		var kv *store.KV
		var err error
		for range 50 {
			if kv, err = s.Get(ctx, "/d/x"); err == nil {
				break
			}
			if pause(ctx, 100*time.Millisecond) != nil { // the resumed member may still be rejoining
				break
			}
		}
		if err != nil || kv == nil || string(kv.Value) != "b1" {
			t.Errorf("/d/x = %v (%v), want b's write", kv, err)
		}
	}
	if _, err := fsa.Txn(ctx, nil, []store.Op{store.Put("/d/x", []byte("a3"))}, nil); !isFenced(err) {
		t.Errorf("a's write after the partition healed: %v, want ErrFenced", err)
	}
}

// waitStopped returns once every thread of process pid is stopped.
func waitStopped(t testing.TB, pid int) {
	t.Helper()
	limit := time.Now().Add(waitLimit)
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if err != nil {
				stopped = false // a thread came or went; look again
				break
			}
			// The state follows the command name, which is in parentheses.
			i := bytes.LastIndexByte(b, ')')
			if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(limit) {
			t.Fatalf("process %d did not stop", pid)
		}
		time.Sleep(time.Millisecond) // polling /proc: there is nothing to wait on
	}
}

// BenchmarkTakeover measures, on three etcd members with default election
// settings, the time from the leader's death (its client closed without
// resigning, as a kill -9 would: the lease stays until it expires) to the
// next leader's first fenced write. Each iteration takes about one TTL;
// run with e.g. -benchtime=5x.
func BenchmarkTakeover(b *testing.B) {
	etcdtest.Require(b)
	c := etcdtest.Start(b, etcdproc.Config{Members: 3})
	prefix := newPrefix()
	ctx := ctxT(b, time.Duration(b.N+2)*time.Minute)
	open := func() store.Store { return openEtcd(b, c.Endpoints(), prefix) }

	sl := open()
	leader, err := newT(b, Config{Store: sl, Name: "n0"}).Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var total, worst time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ss := open()
		res := campaignAsync(b, ctx, newT(b, Config{Store: ss, Name: fmt.Sprintf("n%d", i+1)}))
		// Let the leader renew at least once after the standby started
		// watching, as it would in a running cluster.
		waitRenewal(b, ctx, leader)
		b.StartTimer()

		killed := time.Now()
		sl.Close()
		r := <-res
		if r.err != nil {
			b.Fatal(r.err)
		}
		if _, err := Fenced(ss, r.term).Txn(ctx, nil, []store.Op{store.Put("/d/x", []byte(r.term.Name))}, nil); err != nil {
			b.Fatal(err)
		}
		d := time.Since(killed)
		total += d
		worst = max(worst, d)
		sl, leader = ss, r.term
	}
	b.StopTimer()
	b.ReportMetric(total.Seconds()/float64(b.N), "s/takeover")
	b.ReportMetric(worst.Seconds(), "max-s/takeover")
}

// waitRenewal returns after the leader's lease was renewed (its remaining
// TTL went up).
func waitRenewal(tb testing.TB, ctx context.Context, term *Term) {
	tb.Helper()
	d := term.Deadline()
	for term.Deadline().Equal(d) {
		if term.Err() != nil {
			tb.Fatalf("the leader lost its term: %v", term.Err())
		}
		if pause(ctx, 50*time.Millisecond) != nil {
			tb.Fatal(ctx.Err())
		}
	}
}
