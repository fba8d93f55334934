package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/storecfg"
)

// rapiProbe polls GET /2/info on the dev cluster's corral-rapi until stopped
// and records when each answer came and its status (0: no answer).
type rapiProbe struct {
	mu      sync.Mutex
	answers []rapiAnswer
	stop    chan struct{}
	done    chan struct{}
}

type rapiAnswer struct {
	at   time.Time
	code int
}

func startRAPIProbe(t *testing.T, c *cluster, every time.Duration) *rapiProbe {
	t.Helper()
	env, err := devcluster.ReadRAPIEnv(c.st.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	hc := rapiHTTPClient(t, env.CA)
	hc.Timeout = 5 * time.Second
	p := &rapiProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(every):
			}
			code := 0
			req, _ := http.NewRequest(http.MethodGet, env.URL+"/2/info", nil)
			req.SetBasicAuth(env.User, env.Password)
			if resp, err := hc.Do(req); err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			p.mu.Lock()
			p.answers = append(p.answers, rapiAnswer{time.Now(), code})
			p.mu.Unlock()
		}
	}()
	t.Cleanup(p.end)
	return p
}

func (p *rapiProbe) end() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// outage finds, after t0, the first failed answer and the first 200
// answer after it (zero times if none).
func (p *rapiProbe) outage(t0 time.Time) (failAt, okAt time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.answers {
		switch {
		case !a.at.After(t0):
		case failAt.IsZero() && a.code != http.StatusOK:
			failAt = a.at
		case !failAt.IsZero() && a.code == http.StatusOK:
			return failAt, a.at
		}
	}
	return failAt, time.Time{}
}

// anyOK reports whether some answer was a 200.
func (p *rapiProbe) anyOK() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.answers {
		if a.code == http.StatusOK {
			return true
		}
	}
	return false
}

// since counts answers after t0: all, and those that were not 200.
func (p *rapiProbe) since(t0 time.Time) (all, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.answers {
		if a.at.After(t0) {
			all++
			if a.code != http.StatusOK {
				failed++
			}
		}
	}
	return all, failed
}

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
	p := startRAPIProbe(t, c, 20*time.Millisecond)
	waitFor(t, 30*time.Second, "RAPI to answer through the standby", p.anyOK)

	killAt := time.Now()
	c.killDaemon(target.Proc)
	elected := c.leader(60 * time.Second)
	electedAt := time.Now()
	if elected.Proc == target.Proc {
		t.Fatalf("the killed %s leads", target.Proc)
	}
	var failAt, okAt time.Time
	waitFor(t, 30*time.Second, "RAPI to answer after the takeover", func() bool {
		failAt, okAt = p.outage(killAt)
		return !okAt.IsZero()
	})
	if okAt.After(electedAt.Add(time.Second)) {
		t.Errorf("RAPI answered %v after the kill, %v after the new master answered: more than the takeover plus one second",
			okAt.Sub(killAt).Round(time.Millisecond), okAt.Sub(electedAt).Round(time.Millisecond))
	}
	// From then on it keeps answering.
	steady := okAt.Add(500 * time.Millisecond)
	time.Sleep(3 * time.Second)
	p.end()
	all, failed := p.since(steady)
	if all == 0 || failed > 0 {
		t.Errorf("after RAPI recovered: %d of %d calls failed", failed, all)
	}
	total, down := p.since(killAt)
	t.Logf("SIGKILL of %s: %s elected and answering %v later; RAPI failed from %v to %v after the kill (%d of %d calls failed)",
		target.Name, elected.Name, electedAt.Sub(killAt).Round(time.Millisecond), failAt.Sub(killAt).Round(time.Millisecond),
		okAt.Sub(killAt).Round(time.Millisecond), down, total)
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
