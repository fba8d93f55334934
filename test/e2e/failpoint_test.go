package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/failpoint"
)

// fpStep is one step of a job: its opcode index, its index in the unit, and
// whether it calls a node (and so passes rpc-returned).
type fpStep struct {
	op, step int
	rpc      bool
}

// fpPlan is an instance job whose steps are known in advance, so the hit
// count of a failpoint tells exactly where the master dies.
type fpPlan struct {
	name    string
	tmpl    string
	removed bool // the job ends by removing the instance
	ops     func(inst string) []any
	steps   []fpStep
}

// fpNode holds the test's instances; it is not the master's node, so its
// daemon's log shows only the instances' RPCs.
const fpNode = "node2"

func fpCreate(inst, tmpl string) map[string]any {
	op := createOp(inst, fpNode, 8)
	op["beparams"] = map[string]any{"memory": 128}
	if tmpl == "diskless" {
		op["disk_template"], op["disks"] = "diskless", []any{}
	}
	return op
}

// The steps follow internal/cmdlib: create is reserve, create-disks,
// install-os, start; shutdown is mark-down, stop; startup is mark-up,
// start; remove is shutdown, remove-rescue-initrd (a node call only for a
// rescued instance), remove-disks, remove-config.
var (
	// fpUp leaves the instance running: a file disk, so every create step
	// calls the node.
	fpUp = fpPlan{name: "up", tmpl: "file",
		ops: func(inst string) []any {
			return []any{fpCreate(inst, "file"), instOp("OP_INSTANCE_SHUTDOWN", inst), instOp("OP_INSTANCE_STARTUP", inst)}
		},
		steps: []fpStep{{0, 0, false}, {0, 1, true}, {0, 2, true}, {0, 3, true}, {1, 0, false}, {1, 1, true}, {2, 0, false}, {2, 1, true}},
	}
	// fpGone goes through the whole life cycle of a diskless instance.
	fpGone = fpPlan{name: "gone", tmpl: "diskless", removed: true,
		ops: func(inst string) []any {
			return []any{fpCreate(inst, "diskless"), instOp("OP_INSTANCE_SHUTDOWN", inst), instOp("OP_INSTANCE_STARTUP", inst),
				instOp("OP_INSTANCE_REMOVE", inst)}
		},
		steps: []fpStep{{0, 0, false}, {0, 1, false}, {0, 2, true}, {0, 3, true}, {1, 0, false}, {1, 1, true}, {2, 0, false},
			{2, 1, true}, {3, 0, true}, {3, 1, false}, {3, 2, false}, {3, 3, false}},
	}
)

// hits is how often a run of the plan passes point.
func (p fpPlan) hits(point string) int {
	n := 0
	for _, s := range p.steps {
		if point == failpoint.StepCommitted || point == failpoint.StepBegan || s.rpc {
			n++
		}
	}
	return n
}

// resumeAt is where the op killed at the hit-th pass of point resumes:
// before a step ran, or after an RPC whose step did not commit, at that
// step again; after a committed step, at the next one. An op's last commit
// also records its success, so a crash right after it resumes nothing
// (last is true): the next op, if any, starts afresh.
func (p fpPlan) resumeAt(point string, hit int) (at fpStep, last bool) {
	n := 0
	for i, s := range p.steps {
		if point == failpoint.RPCReturned && !s.rpc {
			continue
		}
		if n++; n < hit {
			continue
		}
		if point == failpoint.RPCReturned || point == failpoint.StepBegan {
			return s, false
		}
		s.step++
		return s, i+1 == len(p.steps) || p.steps[i+1].op != s.op
	}
	panic(fmt.Sprintf("plan %s passes %s fewer than %d times", p.name, point, hit))
}

// TestFailpointMasterCrash kills corrald at the master's two failpoints at
// several hit counts, so the crash lands in different steps of instance
// jobs, restarts it without failpoints, and checks the crash loop's
// invariants plus: the job resumes exactly where it died and succeeds, the
// node did each thing once (an RPC whose answer the master lost is answered
// from the node's record), and the instance is on the node as recorded.
func TestFailpointMasterCrash(t *testing.T) {
	// The watcher would start jobs of its own between the test's steps.
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Hour})
	l := &crashLoop{t: t, c: c, socket: c.st.Socket, nodes: c.st.Nodes,
		jobs: map[int64]ackedJob{}, final: map[int64]string{}, wasRunning: map[int64]int{}}
	// Every pass of both points: a crash after every step commit and
	// after every node RPC of create, shutdown, startup and remove. The
	// plans differ in steps only by the disk, which rpc-returned covers.
	type fpCase struct {
		point string
		plan  fpPlan
		hit   int
	}
	var cases []fpCase
	for _, point := range failpoint.MasterPoints() {
		plans := []fpPlan{fpGone}
		if point == failpoint.RPCReturned {
			plans = append(plans, fpUp)
		}
		for _, plan := range plans {
			for hit := 1; hit <= plan.hits(point); hit++ {
				cases = append(cases, fpCase{point, plan, hit})
			}
		}
	}
	worker := &crashWorker{l: l, n: 1}
	at := map[string]int{}
	for i, tc := range cases {
		k := i + 1
		where, last := tc.plan.resumeAt(tc.point, tc.hit)
		inst := &ownedInst{name: fmt.Sprintf("fp%d-%s", k, tc.plan.name), node: fpNode, tmpl: tc.plan.tmpl, up: !tc.plan.removed, removed: tc.plan.removed}
		worker.insts = append(worker.insts, inst)
		spec := fmt.Sprintf("%s=%d", tc.point, tc.hit)

		// An armed corrald: the job's own steps are the only passes.
		c.stopDaemon("corrald")
		off, nodeOff := l.logSize(), c.logSize("corral-node "+fpNode)
		p := c.startDaemon("corrald", failpoint.EnvVar+"="+spec)
		pre := l.snapshot(k)
		gen := l.gen.Load()
		ctx, cancel := l.callCtx()
		id, err := c.luxi.SubmitJob(ctx, tc.plan.ops(inst.name))
		cancel()
		if err != nil {
			t.Fatalf("case %d (%s): submit: %v", k, spec, err)
		}
		l.ack(id, gen, fmt.Sprintf("%s with %s", inst.name, spec))
		c.waitInjectedCrash("corrald", p.PID, off, tc.point, tc.hit)

		// Restarted without failpoints, the crash loop's invariants hold.
		l.gen.Add(1)
		off = l.logSize()
		l.restart(k, off)
		l.check(k, pre, off)

		if status, res := c.waitJob(id, time.Minute); status != "success" {
			t.Fatalf("case %d (%s): job %d ended %s after the restart: %s", k, spec, id, status, toJSON(res))
		}
		ctx, cancel = l.callCtx()
		rows, err := queryJobs(ctx, c.luxi, []int64{id}, []string{"ops", "oplog"})
		cancel()
		if err != nil {
			t.Fatalf("case %d: %v", k, err)
		}
		resumed := l.checkResume(id, rows[0][0], rows[0][1], at)
		want := fmt.Sprintf("resumed after a master restart at step %d", where.step)
		logs, _ := rows[0][1].([]any)
		switch {
		case last && resumed:
			t.Errorf("case %d (%s): job %d died between two ops, yet an op resumed: %s", k, spec, id, toJSON(logs))
		case !last && (where.op >= len(logs) || !strings.Contains(toJSON(logs[where.op]), want)):
			t.Errorf("case %d (%s): op %d of job %d should log %q: %s", k, spec, where.op, id, want, toJSON(logs))
		}
		if tc.point == failpoint.RPCReturned {
			// The step ran again and sent the same operation: the node
			// answered from its record instead of acting twice.
			opID := fmt.Sprintf("op=job/%d/op/%d/step/%d/", id, where.op, where.step)
			replayed := false
			for _, line := range strings.Split(c.logSince("corral-node "+fpNode, nodeOff), "\n") {
				replayed = replayed || (strings.Contains(line, "rpc answered from operation record") && strings.Contains(line, opID))
			}
			if !replayed {
				t.Errorf("case %d (%s): %s did not answer the repeated rpc %s from its record:\n%s", k, spec, fpNode, opID,
					c.logSince("corral-node "+fpNode, nodeOff))
			}
		}
		fpCheckNode(t, c, k, inst)
		if last {
			t.Logf("case %d: %s killed corrald in job %d once op %d had succeeded; the job went on and succeeded", k, spec, id, where.op)
		} else {
			t.Logf("case %d: %s killed corrald in job %d, to resume op %d at step %d; the job succeeded", k, spec, id, where.op, where.step)
		}
	}

	ctx, cancel := l.callCtx()
	defer cancel()
	l.compareFinal(ctx, "end")
	l.checkInstances(ctx, []*crashWorker{worker})
	t.Logf("resumptions by opcode and step: %v", at)
}

// fpCheckNode checks that the instance exists once, in the configuration and
// on its node, in the state its job left, and on no other node.
func fpCheckNode(t *testing.T, c *cluster, k int, inst *ownedInst) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rows, err := c.luxi.QueryInstances(ctx, nil, []string{"name", "uuid", "status"}, false)
	if err != nil {
		t.Fatalf("case %d: %v", k, err)
	}
	var uuids []string
	for _, r := range rows {
		if r[0] == inst.name {
			uuids = append(uuids, fmt.Sprint(r[1]))
			if r[2] != "running" {
				t.Errorf("case %d: instance %s is %v, want running", k, inst.name, r[2])
			}
		}
	}
	switch {
	case inst.removed && len(uuids) != 0:
		t.Errorf("case %d: removed instance %s is still configured: %v", k, inst.name, uuids)
	case !inst.removed && len(uuids) != 1:
		t.Fatalf("case %d: instance %s configured %d times", k, inst.name, len(uuids))
	}
	for _, node := range c.st.Nodes {
		var found []string
		for _, r := range c.nodeInstances(node) {
			if r.Name == inst.name {
				found = append(found, r.UUID)
			}
		}
		wantOn := !inst.removed && node == inst.node
		switch {
		case wantOn && (len(found) != 1 || found[0] != uuids[0]):
			t.Errorf("case %d: %s runs %v instances named %s, want exactly uuid %s", k, node, found, inst.name, uuids[0])
		case !wantOn && len(found) != 0:
			t.Errorf("case %d: %s runs instance %s (%v), which should not run there", k, node, inst.name, found)
		}
	}
	if !inst.removed && inst.tmpl == "file" {
		if files := c.diskFiles(inst.node, uuids[0]); len(files) != 1 {
			t.Errorf("case %d: instance %s has disk files %v, want one", k, inst.name, files)
		}
	}
}
