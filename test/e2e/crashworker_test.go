package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/corral/corral/internal/luxi"
)

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
