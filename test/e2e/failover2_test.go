package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/storecfg"
)

// logEntry is one job log entry as a subscriber received it.
type logEntry struct {
	serial int64
	msg    string
}

// jobSubscriber follows one job's log with WaitForJobChange the way the CLI
// does (prev_job_info and prev_log_serial carried from answer to answer)
// and, when its master goes away, reconnects to whichever candidate leads
// and goes on from its last serial.
type jobSubscriber struct {
	st         *devcluster.State
	id         int64
	seen       []logEntry
	reconnects int
	status     string
	err        error
}

func (s *jobSubscriber) run(ctx context.Context, sock string) {
	var prevInfo []any
	var prevSerial *int64
	var cl *luxi.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for {
		if ctx.Err() != nil {
			s.err = fmt.Errorf("gave up at serial %v: %w", prevSerial, ctx.Err())
			return
		}
		if cl == nil {
			if sock == "" {
				lead, err := devcluster.WaitLeader(ctx, s.st, 30*time.Second)
				if err != nil {
					s.err = fmt.Errorf("no master to reconnect to: %w", err)
					return
				}
				sock = lead.Socket
				s.reconnects++
			}
			c, err := luxi.Dial(ctx, sock)
			if err != nil {
				sock = ""
				continue
			}
			cl = c
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ch, err := cl.WaitForJobChange(cctx, s.id, []string{"status"}, prevInfo, prevSerial, 5)
		cancel()
		if err != nil {
			// The master died or stood down under us (a standby answers
			// every call with its standby error): find the new one.
			cl.Close()
			cl, sock = nil, ""
			continue
		}
		if ch.NoChange {
			continue
		}
		if len(ch.JobInfo) != 1 {
			s.err = fmt.Errorf("WaitForJobChange answered %d field values, want 1", len(ch.JobInfo))
			return
		}
		st, _ := ch.JobInfo[0].(string)
		for _, e := range ch.LogEntries {
			if len(e) < 4 {
				s.err = fmt.Errorf("malformed log entry %s", toJSON(e))
				return
			}
			n, ok := e[0].(float64)
			if !ok {
				s.err = fmt.Errorf("log entry without a numeric serial: %s", toJSON(e))
				return
			}
			serial := int64(n)
			s.seen = append(s.seen, logEntry{serial, fmt.Sprint(e[3])})
			if prevSerial == nil || serial > *prevSerial {
				prevSerial = &serial
			}
		}
		if len(ch.LogEntries) == 0 && finalStatus(st) {
			s.status = st
			return
		}
		prevInfo = ch.JobInfo
	}
}

// TestWaitForJobChangeAcrossFailover follows a job that logs steadily with
// three subscribers on the master's socket, SIGKILLs the master half-way
// and lets each subscriber reconnect to the new master with its last
// serial. Every subscriber must see the job's whole log, each entry once
// and in order, and the job must finish on the new master.
func TestWaitForJobChangeAcrossFailover(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 3, Masters: 2, CorraldArgs: []string{"--election-ttl", failoverTTL}})
	first := c.leader(30 * time.Second)
	const rounds = 60
	id := c.submitOne(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0.15, "repeat": rounds})

	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, should the test end early
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	subs := make([]*jobSubscriber, 3)
	for i := range subs {
		subs[i] = &jobSubscriber{st: c.st, id: id}
		wg.Add(1)
		go func() {
			defer wg.Done()
			subs[i].run(ctx, first.Socket)
		}()
	}
	// Kill the master with the job well under way, so some entries come
	// before the kill and the rest from the new master.
	waitFor(t, 30*time.Second, "the job to log 10 entries", func() bool {
		rows, err := queryJobs(ctx, c.luxi, []int64{id}, []string{"oplog"})
		return err == nil && len(flattenLog(t, rows[0][0])) >= 10
	})
	c.killDaemon(first.Proc)
	c.luxi.Close()
	c.luxi = nil
	second := c.leader(30 * time.Second)
	if second.Proc == first.Proc {
		t.Fatalf("%s leads again after its SIGKILL", second.Proc)
	}
	c.useMaster(second)
	wg.Wait()

	rows, err := queryJobs(ctx, c.luxi, []int64{id}, []string{"status", "oplog"})
	if err != nil {
		t.Fatal(err)
	}
	if st := fmt.Sprint(rows[0][0]); st != "success" {
		t.Fatalf("job %d ended %s: %s", id, st, toJSON(rows[0][1]))
	}
	final := flattenLog(t, rows[0][1])
	for i := 1; i < len(final); i++ {
		if final[i].serial <= final[i-1].serial {
			t.Fatalf("the job's log goes back from serial %d to %d: %v", final[i-1].serial, final[i].serial, final)
		}
	}
	// The step is repeated whole by the new master, so its first
	// iteration is logged twice; a log of exactly one run would mean the
	// kill missed the job.
	if firsts := countMsg(final, fmt.Sprintf("Test delay iteration 1/%d", rounds)); firsts < 2 {
		t.Fatalf("the job's log shows %d runs, want a resumed second one: %v", firsts, final)
	}
	if !strings.Contains(toJSON(rows[0][1]), "resumed after a master restart") {
		t.Errorf("the job's log does not say it was resumed: %v", final)
	}
	for i, s := range subs {
		if s.err != nil {
			t.Errorf("subscriber %d: %v (saw %d entries)", i, s.err, len(s.seen))
			continue
		}
		if s.status != "success" {
			t.Errorf("subscriber %d saw the job end %q", i, s.status)
		}
		if s.reconnects == 0 {
			t.Errorf("subscriber %d never reconnected: it missed the failover", i)
		}
		if fmt.Sprint(s.seen) != fmt.Sprint(final) {
			t.Errorf("subscriber %d saw %d entries, the job logged %d:\nsaw   %v\nwant  %v", i, len(s.seen), len(final), s.seen, final)
		}
	}
	t.Logf("job %d logged %d entries across the failover from %s to %s", id, len(final), first.Name, second.Name)
}

// flattenLog turns a job's oplog field (one list of entries per opcode)
// into one list.
func flattenLog(t *testing.T, v any) []logEntry {
	t.Helper()
	var out []logEntry
	ops, _ := v.([]any)
	for _, op := range ops {
		entries, _ := op.([]any)
		for _, ev := range entries {
			e, _ := ev.([]any)
			if len(e) < 4 {
				t.Fatalf("malformed log entry %s", toJSON(ev))
			}
			n, ok := e[0].(float64)
			if !ok {
				t.Fatalf("log entry without a numeric serial: %s", toJSON(ev))
			}
			out = append(out, logEntry{int64(n), fmt.Sprint(e[3])})
		}
	}
	return out
}

func countMsg(l []logEntry, msg string) int {
	n := 0
	for _, e := range l {
		if e.msg == msg {
			n++
		}
	}
	return n
}

// TestPartitionedOldMaster cuts the master off from etcd: each corrald is
// pointed at distinct etcd members (the master at member 1 only, the
// standby at members 2 and 3), and member 1 is frozen with SIGSTOP, so the
// master's store calls hang as in a network partition while the other two
// members keep their quorum. The old master must step down and exit, the
// standby must take over and finish the jobs, and no two masters may ever
// commit: the old term ends before the new one begins, every job log entry
// was written in one of the two terms and never after a later one, and the
// node saw the new master's epoch.
func TestPartitionedOldMaster(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 1, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 3, Masters: 2, NoForward: true, CorraldArgs: []string{"--election-ttl", failoverTTL}})
	cands := c.st.Candidates()
	if len(cands) != 2 || len(c.st.EtcdEndpoints) != 3 {
		t.Fatalf("%d candidates and %d etcd members, want 2 and 3", len(cands), len(c.st.EtcdEndpoints))
	}
	old, other := cands[0], cands[1]
	eps := c.st.EtcdEndpoints

	// The dev cluster gives every corrald all members; point each at its
	// own. The standby stops first so the master's resignation leaves the
	// role free for its own restart.
	c.stopDaemon(other.Proc)
	c.setEndpoints(eps[:1])
	c.stopDaemon(old.Proc)
	c.restartCandidate(old.Proc, eps[:1], eps[1:])
	if got := c.leader(30 * time.Second); got.Proc != old.Proc {
		t.Fatalf("%s leads, want %s", got.Proc, old.Proc)
	}
	c.useMaster(old)
	c.setEndpoints(eps[1:])
	c.restartCandidate(other.Proc, eps[1:], eps[:1])
	c.wantStandby(other, old.Name)
	// A candidate reads store.json again each time it stands by: the old
	// master, once its term ends, must still see its own member only.
	c.setEndpoints(eps[:1])
	oldToken := electedToken(t, c.logSince(old.Proc, 0), 1)

	// A job that runs through the cut, with node RPCs, and short ones
	// around it.
	long := c.submitOne(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0.1, "repeat": 60, "on_nodes": []any{"node1", "node2"}})
	ids := append([]int64{long}, c.submitDelays(10, 0.3)...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	waitFor(t, 30*time.Second, "the long job to log 10 entries", func() bool {
		rows, err := queryJobs(ctx, c.luxi, []int64{long}, []string{"oplog"})
		return err == nil && len(flattenLog(t, rows[0][0])) >= 10
	})

	member := c.proc(devcluster.EtcdMemberName(1))
	oldPID := c.proc(old.Proc).PID
	oldLogOff := c.logSize(old.Proc)
	if err := syscall.Kill(member.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(member.PID, syscall.SIGCONT); err != nil {
				t.Errorf("resuming %s: %v", member.Name, err)
			}
		}
	}
	t.Cleanup(resume)
	c.luxi.Close()
	c.luxi = nil

	// The old master notices on its own clock that it can no longer renew
	// its lease, says so, and stands by again (it does not exit).
	waitFor(t, 30*time.Second, "the partitioned master to log that its term ended", func() bool {
		return strings.Contains(c.logSince(old.Proc, oldLogOff), "master term ended")
	})
	if gone(oldPID) {
		t.Fatalf("the partitioned master (pid %d) exited", oldPID)
	}
	oldTail := c.logSince(old.Proc, oldLogOff)
	if !strings.Contains(oldTail, "master term ended") {
		t.Fatalf("the partitioned master did not log that its term ended:\n%s", oldTail)
	}
	oldEnd := logTime(t, oldTail, "master term ended")
	second := c.leader(30 * time.Second)
	if second.Proc != other.Proc {
		t.Fatalf("%s leads after the partition, want %s", second.Proc, other.Proc)
	}
	c.useMaster(second)
	otherLog := c.logSince(other.Proc, 0)
	newToken := electedToken(t, otherLog, 1)
	newStart := logTime(t, otherLog, "elected master")
	if newToken <= oldToken {
		t.Errorf("the new term's token %d does not follow the old one's %d", newToken, oldToken)
	}
	if !oldEnd.Before(newStart) {
		t.Errorf("the old master's term ended at %v, after the new master was elected at %v", oldEnd, newStart)
	}

	// The frozen member comes back: whatever the old master had in
	// flight through it must not land in the new term.
	resume()
	c.waitJobs(ids, time.Minute)
	rows, err := queryJobs(ctx, c.luxi, ids, []string{"oplog"})
	if err != nil {
		t.Fatal(err)
	}
	resumedLong := false
	for i, r := range rows {
		entries := flattenLog(t, r[0])
		times := logEntryTimes(t, r[0])
		for k := range entries {
			at := times[k]
			if at.After(oldEnd) && at.Before(newStart) {
				t.Errorf("job %d logged %q at %v, between the old term's end (%v) and the new term's start (%v)", ids[i], entries[k].msg, at, oldEnd, newStart)
			}
			if k > 0 && at.Before(times[k-1]) {
				t.Errorf("job %d: entry %d (%q, %v) is older than entry %d before it (%v): a stale write landed late",
					ids[i], entries[k].serial, entries[k].msg, at, entries[k-1].serial, times[k-1])
			}
			if ids[i] == long && at.After(newStart) {
				resumedLong = true
			}
		}
	}
	if !resumedLong {
		t.Error("the long job logged nothing under the new master: the partition caught nothing running")
	}
	// Each node took an RPC of the new term, so it refuses the old one's.
	for _, node := range c.st.Nodes {
		b, err := os.ReadFile(filepath.Join(bootstrap.Layout{StateDir: c.dir}.NodeDir(node), "rpc", "epoch"))
		if err != nil {
			t.Fatal(err)
		}
		epoch, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("%s's epoch file: %v", node, err)
		}
		if epoch < newToken {
			t.Errorf("%s's highest master epoch is %d, below the new term's token %d", node, epoch, newToken)
		}
	}
	t.Logf("term %d ended at %v; term %d began at %v", oldToken, oldEnd.Format(time.StampMilli), newToken, newStart.Format(time.StampMilli))
}

// setEndpoints rewrites the cluster's store record so that a corrald
// started next talks to eps only, keeping the file's owner.
func (c *cluster) setEndpoints(eps []string) {
	c.t.Helper()
	dir := bootstrap.Layout{StateDir: c.dir}.MasterDir()
	fi, err := os.Stat(storecfg.Path(dir))
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := c.storeRecord()
	cfg.Endpoints = slices.Clone(eps)
	if err := storecfg.Save(dir, cfg); err != nil {
		c.t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.Chown(storecfg.Path(dir), int(st.Uid), int(st.Gid)); err != nil {
		c.t.Fatal(err)
	}
}

// restartCandidate starts a stopped corrald and checks from its log that
// its store client talks to the members in want and none in not.
func (c *cluster) restartCandidate(proc string, want, not []string) {
	c.t.Helper()
	off := c.logSize(proc)
	if _, err := devcluster.Restart(c.st, proc); err != nil {
		c.t.Fatal(err)
	}
	var line string
	waitFor(c.t, 30*time.Second, proc+" to open its store", func() bool {
		for l := range strings.Lines(c.logSince(proc, off)) {
			if strings.Contains(l, "store opened") {
				line = l
				return true
			}
		}
		return false
	})
	for _, e := range want {
		if !strings.Contains(line, e) {
			c.t.Fatalf("%s does not talk to %s: %s", proc, e, line)
		}
	}
	for _, e := range not {
		if strings.Contains(line, e) {
			c.t.Fatalf("%s talks to %s: %s", proc, e, line)
		}
	}
}

// logTime is the time of the last corrald log record (slog text) holding
// msg.
func logTime(t *testing.T, log, msg string) time.Time {
	t.Helper()
	var at time.Time
	found := false
	for l := range strings.Lines(log) {
		v, ok := strings.CutPrefix(l, "time=")
		if !ok || !strings.Contains(l, msg) {
			continue // not a log record: the exit message, say
		}
		v, _, _ = strings.Cut(v, " ")
		tm, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Fatalf("log line without a time: %q", l)
		}
		at, found = tm, true
	}
	if !found {
		t.Fatalf("no %q in the log:\n%s", msg, log)
	}
	return at
}

// electedToken is the fencing token of the n-th-from-last "elected master"
// line of a corrald log.
func electedToken(t *testing.T, log string, n int) int64 {
	t.Helper()
	var toks []int64
	for l := range strings.Lines(log) {
		if !strings.Contains(l, "elected master") {
			continue
		}
		_, v, ok := strings.Cut(l, " token=")
		if !ok {
			t.Fatalf("elected without a token: %q", l)
		}
		v, _, _ = strings.Cut(strings.TrimSpace(v), " ")
		tok, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("bad token in %q: %v", l, err)
		}
		toks = append(toks, tok)
	}
	if len(toks) < n {
		t.Fatalf("%d 'elected master' lines in the log, want %d:\n%s", len(toks), n, log)
	}
	return toks[len(toks)-n]
}

// logEntryTimes are the times of a job's log entries, in flattenLog's
// order.
func logEntryTimes(t *testing.T, v any) []time.Time {
	t.Helper()
	var out []time.Time
	ops, _ := v.([]any)
	for _, op := range ops {
		entries, _ := op.([]any)
		for _, ev := range entries {
			e, _ := ev.([]any)
			ts, _ := e[1].([]any)
			if len(ts) != 2 {
				t.Fatalf("log entry without a [sec, usec] time: %s", toJSON(ev))
			}
			sec, _ := ts[0].(float64)
			usec, _ := ts[1].(float64)
			out = append(out, time.Unix(int64(sec), int64(usec)*1000))
		}
	}
	return out
}
