package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
)

// crashKills is how many times TestCrashLoop kills corrald. The environment
// variable CORRAL_CRASH_KILLS may raise it (a smaller value is ignored), and
// CORRAL_CRASH_SEED replays a run's random choices.
const crashKills = 30

const (
	crashWorkers     = 3
	crashMaxPending  = 8 // unfinished jobs one worker keeps in flight
	crashCallTimeout = 10 * time.Second
	crashDrainLimit  = 90 * time.Second
)

// legalJobStatus are the statuses a job may have at any time.
var legalJobStatus = map[string]bool{"queued": true, "waiting": true, "canceling": true, "running": true,
	"canceled": true, "success": true, "error": true}

func finalStatus(s string) bool { return s == "success" || s == "error" || s == "canceled" }

// TestCrashLoop submits jobs from several clients while corrald is killed
// with SIGKILL at random moments and restarted, and checks after every
// restart what a crash must never do: lose an acknowledged job, reuse an id,
// change a finished job, move a serial number back, or leave a store that
// does not open. At the end every job must have succeeded, jobs caught
// running must have resumed from their last committed step, and the
// instances must be exactly what the successful jobs made.
func TestCrashLoop(t *testing.T) {
	kills := crashKills
	if v := os.Getenv("CORRAL_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("CORRAL_CRASH_KILLS=%q: %v", v, err)
		}
		kills = max(kills, n)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CORRAL_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CORRAL_CRASH_SEED=%q: %v", v, err)
		}
		seed = n
	}
	requireRoot(t)
	t.Logf("seed %d (replay the random choices with CORRAL_CRASH_SEED=%d), %d kills", seed, seed, kills)

	// The watcher would submit jobs of its own on instances it finds down;
	// keep it out of the way so every instance change comes from this test.
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}, watcher: time.Hour})
	l := &crashLoop{t: t, c: c, seed: seed, socket: c.st.Socket, nodes: slices.Clone(c.st.Nodes),
		jobs: map[int64]ackedJob{}, final: map[int64]string{}, wasRunning: map[int64]int{}}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	workers := make([]*crashWorker, crashWorkers)
	var wg sync.WaitGroup
	for i := range workers {
		workers[i] = &crashWorker{l: l, n: i + 1, rng: rand.New(rand.NewPCG(seed, uint64(i+1))), pending: map[int64]*ownedInst{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			workers[i].run(ctx)
		}()
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	for k := 1; k <= kills && !t.Failed(); k++ {
		// Mostly let jobs progress for a while; sometimes kill again right
		// after the restart, while the queue is still resuming jobs.
		pause := time.Duration(300+rng.IntN(1200)) * time.Millisecond
		if rng.IntN(5) == 0 {
			pause = time.Duration(rng.IntN(100)) * time.Millisecond
		}
		time.Sleep(pause)
		pre := l.snapshot(k)
		c.killCorrald()
		l.gen.Add(1)
		off := l.logSize()
		l.restart(k, off)
		l.check(k, pre, off)
	}
	stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("[seed %d] the submitting clients did not stop", seed)
	}
	l.finish(workers)
}

// crashLoop is the shared record of what corrald acknowledged.
type crashLoop struct {
	t      *testing.T
	c      *cluster
	seed   uint64
	socket string
	nodes  []string
	// gen counts corrald's incarnations: it is bumped after a kill and
	// before the restart, so a connection dialled at generation g talks to
	// incarnation g (see crashWorker.connect).
	gen atomic.Int64

	mu       sync.Mutex
	jobs     map[int64]ackedJob
	problems []string

	// Owned by the test goroutine.
	final      map[int64]string // finalized job -> its status, results and logs as JSON
	wasRunning map[int64]int    // job seen running just before kill k
}

type ackedJob struct {
	gen  int64
	what string
}

func (l *crashLoop) failf(format string, args ...any) {
	l.t.Helper()
	l.t.Errorf("[seed %d] "+format, append([]any{l.seed}, args...)...)
}

func (l *crashLoop) ack(id, gen int64, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.jobs[id]; ok {
		l.problems = append(l.problems, fmt.Sprintf("job id %d acknowledged twice: %s (incarnation %d) and %s (incarnation %d)",
			id, prev.what, prev.gen, what, gen))
		return
	}
	l.jobs[id] = ackedJob{gen: gen, what: what}
}

// acked returns the acknowledged jobs, sorted ids first, and takes the
// problems the workers found.
func (l *crashLoop) acked() (ids []int64, jobs map[int64]ackedJob, problems []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	jobs = make(map[int64]ackedJob, len(l.jobs))
	for id, j := range l.jobs {
		ids = append(ids, id)
		jobs[id] = j
	}
	problems, l.problems = l.problems, nil
	slices.Sort(ids)
	return ids, jobs, problems
}

// queryJobs asks for exactly the given jobs (LUXI reads an empty list as
// "all jobs") and checks the answer has a row per job.
func queryJobs(ctx context.Context, cl *luxi.Client, ids []int64, fields []string) ([][]any, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := cl.QueryJobs(ctx, ids, fields)
	if err == nil && len(rows) != len(ids) {
		err = fmt.Errorf("QueryJobs of %d jobs answered %d rows", len(ids), len(rows))
	}
	return rows, err
}

func (l *crashLoop) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// jobDetail is what must never change once a job is finalized.
var jobDetail = []string{"status", "opstatus", "opresult", "oplog"}

// snapshot records, just before kill k, the finished jobs' outcomes, the
// running jobs and the configuration's serial numbers.
func (l *crashLoop) snapshot(k int) (serials map[string]float64) {
	ids, _, _ := l.acked()
	ctx, cancel := l.callCtx()
	defer cancel()
	serials = l.serials(ctx)
	rows, err := queryJobs(ctx, l.c.luxi, ids, []string{"status"})
	if err != nil {
		l.t.Fatalf("[seed %d] querying jobs before kill %d: %v", l.seed, k, err)
	}
	var newlyFinal []int64
	for i, r := range rows {
		if r == nil {
			continue // reported by check
		}
		if st, _ := r[0].(string); st == "running" {
			l.wasRunning[ids[i]] = k
		} else if _, seen := l.final[ids[i]]; finalStatus(st) && !seen {
			newlyFinal = append(newlyFinal, ids[i])
		}
	}
	if rows, err = queryJobs(ctx, l.c.luxi, newlyFinal, jobDetail); err != nil {
		l.t.Fatalf("[seed %d] querying finished jobs before kill %d: %v", l.seed, k, err)
	}
	for i, r := range rows {
		if r != nil {
			l.final[newlyFinal[i]] = toJSON(r)
		}
	}
	return serials
}

// serials maps every instance, node and the cluster to its serial number.
func (l *crashLoop) serials(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	insts, err := l.c.luxi.QueryInstances(ctx, nil, []string{"name", "serial_no"}, false)
	nodes, err2 := l.c.luxi.QueryNodes(ctx, nil, []string{"name", "serial_no"}, false)
	info, err3 := l.c.luxi.QueryClusterInfo(ctx)
	for _, e := range []error{err, err2, err3} {
		if e != nil {
			l.t.Fatalf("[seed %d] querying serial numbers: %v", l.seed, e)
		}
	}
	for _, r := range insts {
		out["instance "+fmt.Sprint(r[0])], _ = r[1].(float64)
	}
	for _, r := range nodes {
		out["node "+fmt.Sprint(r[0])], _ = r[1].(float64)
	}
	var ok bool
	if out["cluster"], ok = info["serial_no"].(float64); !ok {
		l.t.Fatalf("[seed %d] cluster info has no serial_no: %v", l.seed, info["serial_no"])
	}
	return out
}

func (l *crashLoop) logPath() string { return l.c.proc("corrald").Log }

func (l *crashLoop) logSize() int64 {
	st, err := os.Stat(l.logPath())
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince is what corrald logged from offset off on (at most 4 MiB).
func (l *crashLoop) logSince(off int64) string {
	f, err := os.Open(l.logPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, off, 4<<20))
	return string(b)
}

// restart starts corrald again and waits, bounded, until it answers.
func (l *crashLoop) restart(k int, logOff int64) {
	if _, err := devcluster.Restart(l.c.st, "corrald"); err != nil {
		l.t.Fatalf("[seed %d] restarting corrald after kill %d: %v", l.seed, k, err)
	}
	if l.c.luxi != nil {
		l.c.luxi.Close()
		l.c.luxi = nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cl, err := luxi.Dial(ctx, l.socket)
		if err == nil {
			if _, err = cl.QueryConfigValues(ctx, []string{"cluster_name"}); err == nil {
				cancel()
				l.c.luxi = cl
				return
			}
			cl.Close()
		}
		cancel()
		if time.Now().After(deadline) {
			// Make the stuck process print every goroutine's stack (SIGQUIT
			// makes the Go runtime dump them and exit), to show where.
			pid := l.c.proc("corrald").PID
			if syscall.Kill(pid, syscall.SIGQUIT) == nil {
				for i := 0; i < 50 && syscall.Kill(pid, 0) == nil; i++ {
					time.Sleep(100 * time.Millisecond)
				}
				l.t.Logf("corrald (pid %d) after kill %d, since its start:\n%s", pid, k, l.logSince(logOff))
			}
			l.t.Fatalf("[seed %d] corrald did not answer within 30 s of the restart after kill %d: %v", l.seed, k, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Lines of corrald's log that mean the store did not open cleanly or a job
// could not be taken up again.
var badLogRE = regexp.MustCompile(`level=ERROR|panic|skipping unreadable job record|cannot recover`)

// check runs the invariants after the restart that followed kill k.
func (l *crashLoop) check(k int, pre map[string]float64, logOff int64) {
	ids, jobs, problems := l.acked()
	for _, p := range problems {
		l.failf("kill %d: %s", k, p)
	}
	ctx, cancel := l.callCtx()
	defer cancel()

	// Every acknowledged job exists with a legal status.
	rows, err := queryJobs(ctx, l.c.luxi, ids, []string{"status"})
	if err != nil {
		l.failf("kill %d: querying jobs after the restart: %v", k, err)
		return
	}
	count := map[string]int{}
	for i, r := range rows {
		if r == nil {
			l.failf("kill %d: acknowledged job %d (%s) is lost", k, ids[i], jobs[ids[i]].what)
			continue
		}
		st, _ := r[0].(string)
		count[st]++
		if !legalJobStatus[st] {
			l.failf("kill %d: job %d has illegal status %q", k, ids[i], st)
		}
	}

	// Ids are never reused: every id an incarnation acknowledged is above
	// every id acknowledged by an earlier one.
	lo, hi := map[int64]int64{}, map[int64]int64{}
	for _, id := range ids { // ascending
		g := jobs[id].gen
		if _, ok := lo[g]; !ok {
			lo[g] = id
		}
		hi[g] = id
	}
	for g1, h := range hi {
		for g2, m := range lo {
			if g1 < g2 && m <= h {
				l.failf("kill %d: job id %d acknowledged by corrald incarnation %d is not above id %d of incarnation %d",
					k, m, g2, h, g1)
			}
		}
	}

	l.compareFinal(ctx, fmt.Sprintf("kill %d", k))

	// Serial numbers never go back for objects that still exist.
	now := l.serials(ctx)
	for obj, before := range pre {
		if after, ok := now[obj]; ok && after < before {
			l.failf("kill %d: serial_no of %s went back from %v to %v", k, obj, before, after)
		}
	}

	// The store opened cleanly and every job was taken up again.
	for _, line := range strings.Split(l.logSince(logOff), "\n") {
		if badLogRE.MatchString(line) {
			l.failf("kill %d: corrald logged after the restart: %s", k, line)
		}
	}
	l.t.Logf("kill %d: %d acknowledged jobs %v, %d finished jobs checked", k, len(ids), count, len(l.final))
}

// compareFinal checks that every job seen finalized still has exactly the
// status, results and log it had then.
func (l *crashLoop) compareFinal(ctx context.Context, when string) {
	ids := slices.Sorted(maps.Keys(l.final))
	rows, err := queryJobs(ctx, l.c.luxi, ids, jobDetail)
	if err != nil {
		l.failf("%s: querying finished jobs: %v", when, err)
		return
	}
	for i, r := range rows {
		if got := toJSON(r); r != nil && got != l.final[ids[i]] { // a nil row is reported as lost
			l.failf("%s: finished job %d changed:\nbefore %safter  %s", when, ids[i], l.final[ids[i]], got)
		}
	}
}

// finish lets every job end, then checks outcomes, resumption and the
// instances the jobs left.
func (l *crashLoop) finish(workers []*crashWorker) {
	if !l.drain() {
		return
	}
	ids, jobs, problems := l.acked()
	for _, p := range problems {
		l.failf("end: %s", p)
	}
	ctx, cancel := l.callCtx()
	defer cancel()
	l.compareFinal(ctx, "end")

	rows, err := queryJobs(ctx, l.c.luxi, ids, []string{"status", "opstatus", "opresult", "ops", "oplog"})
	if err != nil {
		l.failf("end: querying jobs: %v", err)
		return
	}
	resumed, running := 0, 0
	at := map[string]int{} // "OPCODE@step" -> ops resumed there
	for i, r := range rows {
		id := ids[i]
		if r == nil {
			l.failf("end: acknowledged job %d (%s) is lost", id, jobs[id].what)
			continue
		}
		note := ""
		if k, ok := l.wasRunning[id]; ok {
			note = fmt.Sprintf(", running just before kill %d", k)
			running++
		}
		if r[0] != "success" {
			l.failf("end: job %d (%s%s) ended %v: opstatus %s opresult %s", id, jobs[id].what, note, r[0], toJSON(r[1]), toJSON(r[2]))
		}
		if l.checkResume(id, r[3], r[4], at) {
			resumed++
		}
	}
	l.t.Logf("end: %d acknowledged jobs, %d seen running just before a kill, %d resumed after a restart (ops by step: %v)",
		len(ids), running, resumed, at)
	if running == 0 || resumed == 0 {
		l.failf("end: no kill caught a running job (%d seen running, %d resumed): the loop did not test resumption", running, resumed)
	}

	// A new job still gets an id above every acknowledged one.
	if id, err := l.c.luxi.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0}}); err != nil {
		l.failf("end: submitting: %v", err)
	} else if len(ids) > 0 && id <= ids[len(ids)-1] {
		l.failf("end: new job id %d is not above the last acknowledged id %d", id, ids[len(ids)-1])
	}
	l.checkInstances(ctx, workers)
	for _, w := range workers {
		if len(w.refused) > 0 {
			l.t.Logf("worker %d: %d submissions without an answer, e.g. %s", w.n, len(w.refused), w.refused[0])
		}
	}
}

// drain waits, bounded, until every job in the queue (acknowledged or not)
// is finalized.
func (l *crashLoop) drain() bool {
	deadline := time.Now().Add(crashDrainLimit)
	for {
		ctx, cancel := l.callCtx()
		rows, err := l.c.luxi.QueryJobs(ctx, nil, []string{"id", "status"})
		cancel()
		if err != nil {
			l.failf("end: listing jobs: %v", err)
			return false
		}
		var open []int64
		for _, r := range rows {
			if len(r) == 2 && !finalStatus(fmt.Sprint(r[1])) {
				id, _ := r[0].(float64)
				open = append(open, int64(id))
			}
		}
		if len(open) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			ctx, cancel := l.callCtx()
			detail, _ := queryJobs(ctx, l.c.luxi, open[:min(len(open), 5)], []string{"id", "status", "summary", "opstatus", "oplog"})
			cancel()
			l.failf("end: jobs %v did not finish within %v of the last restart; e.g. %s", open, crashDrainLimit, toJSON(detail))
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

var resumeRE = regexp.MustCompile(`resumed after a master restart at step (\d+)`)

// stepLogs maps log messages of an opcode to the step that writes them (the
// steps of internal/cmdlib's instance create and remove units): once an op
// resumed at step n, no step before n may run, and log, again.
var stepLogs = map[string][]struct {
	prefix string
	step   int
}{
	"OP_INSTANCE_CREATE": {{"Placing instance", 0}, {"Creating disk", 1}, {"Running the OS create scripts", 2}, {"Starting instance", 3}},
	"OP_INSTANCE_REMOVE": {{"Shutting down instance", 0}, {"Removing instance", 3}},
}

// checkResume checks a job's per-op logs: an op resumes at its last
// committed step or later, never earlier. It reports whether the job was
// resumed at all, and counts resumptions by opcode and step in at.
func (l *crashLoop) checkResume(id int64, opsV, logV any, at map[string]int) bool {
	ops, _ := opsV.([]any)
	logs, _ := logV.([]any)
	resumed := false
	for i, lv := range logs {
		opID := ""
		if i < len(ops) {
			m, _ := ops[i].(map[string]any)
			opID, _ = m["OP_ID"].(string)
		}
		entries, _ := lv.([]any)
		reached, resumedAt := -1, -1 // highest step seen running; last resume
		for _, ev := range entries {
			e, _ := ev.([]any)
			if len(e) < 4 {
				l.failf("end: job %d op %d: malformed log entry %s", id, i, toJSON(ev))
				continue
			}
			msg := fmt.Sprint(e[3])
			if m := resumeRE.FindStringSubmatch(msg); m != nil {
				n, _ := strconv.Atoi(m[1])
				resumed = true
				at[fmt.Sprintf("%s@%d", strings.TrimPrefix(opID, "OP_"), n)]++
				if n < reached {
					l.failf("end: job %d op %d (%s) resumed at step %d after step %d had run: %s", id, i, opID, n, reached, toJSON(lv))
				}
				resumedAt, reached = n, max(reached, n)
				continue
			}
			for _, s := range stepLogs[opID] {
				if strings.HasPrefix(msg, s.prefix) {
					if s.step < resumedAt {
						l.failf("end: job %d op %d (%s) ran step %d again after resuming at step %d: %s",
							id, i, opID, s.step, resumedAt, toJSON(lv))
					}
					reached = max(reached, s.step)
				}
			}
		}
	}
	return resumed
}

// checkInstances compares the cluster's instances with what the workers'
// successful jobs made, and looks for disk files nobody owns.
func (l *crashLoop) checkInstances(ctx context.Context, workers []*crashWorker) {
	rows, err := l.c.luxi.QueryInstances(ctx, nil, []string{"name", "admin_state", "status", "pnode", "disk_template", "uuid"}, false)
	if err != nil {
		l.failf("end: querying instances: %v", err)
		return
	}
	have := map[string][]any{}
	owner := map[string]string{} // instance uuid -> primary node
	for _, r := range rows {
		have[fmt.Sprint(r[0])] = r
		owner[fmt.Sprint(r[5])] = fmt.Sprint(r[3])
	}
	known := map[string]bool{}
	checked := 0
	for _, w := range workers {
		for _, inst := range w.insts {
			known[inst.name] = true
			if inst.doubt || inst.failed {
				continue
			}
			checked++
			r, ok := have[inst.name]
			admin, status := "down", "ADMIN_down"
			if inst.up {
				admin, status = "up", "running"
			}
			switch {
			case inst.removed && ok:
				l.failf("end: instance %s was removed by a successful job but still exists: %v", inst.name, r)
			case inst.removed:
			case !ok:
				l.failf("end: instance %s made by successful jobs is missing", inst.name)
			case r[1] != admin || r[2] != status || r[3] != inst.node || r[4] != inst.tmpl:
				l.failf("end: instance %s is %v, want admin_state %s, status %s, pnode %s, disk_template %s",
					inst.name, r, admin, status, inst.node, inst.tmpl)
			case inst.tmpl == "file" && len(l.c.diskFiles(inst.node, fmt.Sprint(r[5]))) != 1:
				l.failf("end: instance %s has disk files %v on %s, want one", inst.name, l.c.diskFiles(inst.node, fmt.Sprint(r[5])), inst.node)
			}
		}
	}
	for name := range have {
		if !known[name] {
			l.failf("end: instance %s exists but no job of this test created it", name)
		}
	}
	for _, node := range l.nodes {
		files, _ := filepath.Glob(filepath.Join(l.c.dir, node, "storage", "file", "*", "*"))
		for _, f := range files {
			if !strings.HasPrefix(filepath.Base(f), ".") && owner[filepath.Base(filepath.Dir(f))] != node {
				l.failf("end: disk file %s belongs to no instance on %s", f, node)
			}
		}
	}
	l.t.Logf("end: %d instances in the cluster, %d with a known expected state checked", len(rows), checked)
}
