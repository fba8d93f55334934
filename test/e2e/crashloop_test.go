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

// ownedInst is an instance one worker owns: only that worker's jobs touch
// it, and only jobs whose outcome does not depend on their order run on it
// at the same time, so the outcome of every job is predictable.
type ownedInst struct {
	name, node, tmpl string
	up               bool // admin state once its jobs succeeded
	removed          bool // a successful job removes it
	busy             int  // jobs touching it that are not yet seen finished
	doubt            bool // a submission touching it got no answer: state unknown
	failed           bool // a job touching it did not succeed
}

// crashWorker submits jobs on its own connection, reconnecting after kills.
type crashWorker struct {
	l       *crashLoop
	n       int
	rng     *rand.Rand
	cl      *luxi.Client
	clGen   int64
	pending map[int64]*ownedInst // acknowledged, not yet seen finished
	insts   []*ownedInst
	refused []string // submissions without an answer (they may or may not exist)
}

func (w *crashWorker) run(ctx context.Context) {
	defer w.drop()
	for ctx.Err() == nil {
		pause := 30 * time.Millisecond
		switch {
		case !w.connect(ctx):
			pause = 50 * time.Millisecond
		case !w.poll(ctx):
			w.drop()
			continue
		case len(w.pending) < crashMaxPending:
			w.submit(ctx)
			pause = time.Duration(10+w.rng.IntN(50)) * time.Millisecond
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

func (w *crashWorker) drop() {
	if w.cl != nil {
		w.cl.Close()
		w.cl = nil
	}
}

// connect dials corrald and tags the connection with the incarnation it
// reached: the generation is read before and after the dial, and the test
// bumps it between the kill and the restart, so an unchanged generation
// means the dial reached the process of that generation.
func (w *crashWorker) connect(ctx context.Context) bool {
	if w.cl != nil {
		return true
	}
	g := w.l.gen.Load()
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cl, err := luxi.Dial(dctx, w.l.socket)
	if err != nil {
		return false
	}
	if w.l.gen.Load() != g {
		cl.Close()
		return false
	}
	w.cl, w.clGen = cl, g
	return true
}

// poll notes which of the worker's jobs finished.
func (w *crashWorker) poll(ctx context.Context) bool {
	ids := slices.Collect(maps.Keys(w.pending))
	qctx, cancel := context.WithTimeout(ctx, crashCallTimeout)
	defer cancel()
	rows, err := queryJobs(qctx, w.cl, ids, []string{"status"})
	if err != nil {
		return false
	}
	for i, r := range rows {
		st := "lost" // reported by the checks after the restart
		if r != nil {
			st, _ = r[0].(string)
		}
		if r != nil && !finalStatus(st) {
			continue
		}
		if inst := w.pending[ids[i]]; inst != nil {
			inst.busy--
			inst.failed = inst.failed || st != "success"
		}
		delete(w.pending, ids[i])
	}
	return true
}

// submit sends one job (or a burst of jobs): mostly test delays, new
// instances going through their life cycle, and changes of instances
// whose earlier jobs succeeded.
func (w *crashWorker) submit(ctx context.Context) {
	var inst *ownedInst
	r := w.rng.IntN(100)
	if r >= 75 {
		if inst = w.idle(); inst == nil {
			r = 0
		}
	}
	var jobs [][]any
	var what string
	switch {
	case r < 50:
		jobs, what = w.delayJob()
	case r < 75:
		inst = w.newInstance()
		jobs, what = w.lifecycleJob(inst)
	case r < 88:
		jobs, what = w.burst(inst)
	default:
		jobs, what = w.followUp(inst)
	}
	sctx, cancel := context.WithTimeout(ctx, crashCallTimeout)
	defer cancel()
	var res []luxi.SubmitResult
	var err error
	if len(jobs) == 1 {
		var id int64
		if id, err = w.cl.SubmitJob(sctx, jobs[0]); err == nil {
			res = []luxi.SubmitResult{{OK: true, JobID: id}}
		}
	} else {
		res, err = w.cl.SubmitManyJobs(sctx, jobs)
	}
	if err != nil {
		// The jobs may or may not have been written: they are not
		// acknowledged, and the instance's state is now unknown.
		w.refused = append(w.refused, fmt.Sprintf("%s: %v", what, err))
		if inst != nil {
			inst.doubt = true
		}
		w.drop()
		return
	}
	for i, r := range res {
		if !r.OK {
			// Only bursts submit several jobs, and a missing one of those
			// changes nothing.
			w.refused = append(w.refused, fmt.Sprintf("%s (job %d of %d): %s", what, i, len(res), r.Err))
			continue
		}
		w.l.ack(r.JobID, w.clGen, fmt.Sprintf("worker %d: %s", w.n, what))
		w.pending[r.JobID] = inst
		if inst != nil {
			inst.busy++
		}
	}
}

// delayJob is one or two test delays, most logging an entry per round.
func (w *crashWorker) delayJob() ([][]any, string) {
	var ops []any
	for i := 0; i <= w.rng.IntN(2); i++ {
		op := map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": float64(20+w.rng.IntN(200)) / 1000, "repeat": w.rng.IntN(4)}
		if w.rng.IntN(4) == 0 {
			// Sleep on a node instead: an RPC that a kill interrupts.
			op["on_master"] = false
			op["on_nodes"] = []string{w.l.nodes[w.rng.IntN(len(w.l.nodes))]}
		}
		ops = append(ops, op)
	}
	return [][]any{ops}, fmt.Sprintf("%d test delays", len(ops))
}

func (w *crashWorker) newInstance() *ownedInst {
	// Half the instances go to the first node, so that jobs often queue for
	// its locks and a kill often falls while a lock passes between jobs.
	node := w.l.nodes[0]
	if w.rng.IntN(2) == 0 {
		node = w.l.nodes[w.rng.IntN(len(w.l.nodes))]
	}
	inst := &ownedInst{name: fmt.Sprintf("crash-w%d-%d", w.n, len(w.insts)+1), node: node, tmpl: "diskless"}
	if w.rng.IntN(2) == 0 {
		inst.tmpl = "file"
	}
	w.insts = append(w.insts, inst)
	return inst
}

// lifecycleJob creates an instance (started) and may stop, start and
// remove it in the same job.
func (w *crashWorker) lifecycleJob(inst *ownedInst) ([][]any, string) {
	create := createOp(inst.name, inst.node, 8)
	create["beparams"] = map[string]any{"memory": 128}
	if inst.tmpl == "diskless" {
		create["disk_template"], create["disks"] = "diskless", []any{}
	}
	ops, names := []any{create}, []string{"create"}
	add := func(id string) {
		ops = append(ops, instOp(id, inst.name))
		names = append(names, strings.ToLower(strings.TrimPrefix(id, "OP_INSTANCE_")))
	}
	inst.up = true
	if w.rng.IntN(2) == 0 {
		add("OP_INSTANCE_SHUTDOWN")
		if inst.up = w.rng.IntN(2) == 0; inst.up {
			add("OP_INSTANCE_STARTUP")
		}
	}
	if inst.removed = w.rng.IntN(4) == 0; inst.removed {
		add("OP_INSTANCE_REMOVE")
	}
	return [][]any{ops}, fmt.Sprintf("%s (%s on %s): %s", inst.name, inst.tmpl, inst.node, strings.Join(names, ","))
}

// idle picks an instance of the worker whose jobs all succeeded.
func (w *crashWorker) idle() *ownedInst {
	var free []*ownedInst
	for _, i := range w.insts {
		if !i.removed && i.busy == 0 && !i.doubt && !i.failed {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return nil
	}
	return free[w.rng.IntN(len(free))]
}

// stateOp is the opcode that keeps or puts an instance in its admin state.
func stateOp(inst *ownedInst) string {
	if inst.up {
		return "OP_INSTANCE_STARTUP"
	}
	return "OP_INSTANCE_SHUTDOWN"
}

// burst is several jobs that each re-apply an instance's admin state. They
// queue for the instance's exclusive lock, so locks pass from job to job
// all the time, and whatever order they run in, the outcome is the same.
func (w *crashWorker) burst(inst *ownedInst) ([][]any, string) {
	jobs := make([][]any, 2+w.rng.IntN(3))
	for i := range jobs {
		jobs[i] = []any{instOp(stateOp(inst), inst.name)}
	}
	return jobs, fmt.Sprintf("%s: %d x %s", inst.name, len(jobs), stateOp(inst))
}

// followUp flips an idle instance's state, or removes it.
func (w *crashWorker) followUp(inst *ownedInst) ([][]any, string) {
	id := "OP_INSTANCE_REMOVE"
	if inst.removed = w.rng.IntN(5) == 0; !inst.removed {
		inst.up = !inst.up
		id = stateOp(inst)
	}
	return [][]any{{instOp(id, inst.name)}}, inst.name + ": " + id
}

func instOp(id, name string) map[string]any {
	return map[string]any{"OP_ID": id, "instance_name": name}
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
	"OP_INSTANCE_REMOVE": {{"Shutting down instance", 0}, {"Removing instance", 2}},
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
