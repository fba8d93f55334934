package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/iallocator"
)

// reconcilerAutoFailover fails over the instances of nodes declared
// offline, when the cluster's auto_failover allows it.
const reconcilerAutoFailover = "node-auto-failover"

// maxAutoFailoverTries bounds the failover jobs submitted for one
// instance while its node stays offline.
const maxAutoFailoverTries = 3

// autoFailover is the node-auto-failover reconciler. It acts on the
// offline flag only, which an operator (or a fencing tool) sets once the
// node is known dead: an unreachable node, a missed heartbeat, is never
// reason enough, since its instances may still run and write their disks.
// For each instance that should run on an offline node and whose data is
// reachable elsewhere, it submits one OP_INSTANCE_FAILOVER job with
// ignore_consistency (the dead node cannot stop it) and the cluster's
// default allocator choosing the target, and waits for it before trying
// again.
type autoFailover struct {
	d       *Daemon
	mu      sync.Mutex
	pending map[string]int64 // instance uuid -> failover job not yet finished
	tries   map[string]int   // instance uuid -> failover jobs submitted
	told    map[string]bool  // instance uuid -> "cannot move" logged
}

func newAutoFailover(d *Daemon) *autoFailover {
	return &autoFailover{d: d, pending: map[string]int64{}, tries: map[string]int{}, told: map[string]bool{}}
}

func (a *autoFailover) run(ctx context.Context) (int, error) {
	d := a.d
	a.mu.Lock()
	defer a.mu.Unlock()
	if !d.cfg.Cluster().AutoFailover || d.queue.Drained() {
		return 0, nil
	}
	submitted := 0
	var failed []error
	seen := map[string]bool{}
	for _, inst := range d.cfg.Instances() {
		node, ok := d.cfg.Node(inst.PrimaryNode)
		if !ok || !node.Offline || inst.AdminState != config.AdminUp {
			continue
		}
		seen[inst.UUID] = true
		if !iallocator.Movable(inst.DiskTemplate) {
			if !a.told[inst.UUID] {
				a.told[inst.UUID] = true
				d.log.Error("auto-failover: the instance's disks live on its offline node; it cannot be failed over",
					"instance", inst.Name, "node", node.Name, "disk_template", inst.DiskTemplate)
			}
			continue
		}
		if id, ok := a.pending[inst.UUID]; ok {
			done, failure := d.jobDone(ctx, id)
			if !done {
				continue
			}
			delete(a.pending, inst.UUID)
			if failure != "" {
				d.updateInstanceStatus(ctx, inst, func(s *config.Status, _ time.Time) {
					s.LastError = fmt.Sprintf("auto-failover job %d: %s", id, failure)
				})
				failed = append(failed, fmt.Errorf("failover of %s (job %d): %s", inst.Name, id, failure))
			}
		}
		if a.tries[inst.UUID] >= maxAutoFailoverTries {
			continue
		}
		id, err := d.submitReconcilerJob(ctx, reconcilerAutoFailover, "failover of an instance of an offline node",
			map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": inst.Name, "ignore_consistency": true})
		if err != nil {
			failed = append(failed, fmt.Errorf("submitting the failover of %s: %w", inst.Name, err))
			continue
		}
		a.tries[inst.UUID]++
		a.pending[inst.UUID] = id
		submitted++
		d.log.Info("auto-failover: failing over an instance of an offline node", "instance", inst.Name, "node", node.Name,
			"job", id, "try", a.tries[inst.UUID])
	}
	// Forget instances that moved, stopped or whose node came back.
	for u := range a.tries {
		if !seen[u] {
			delete(a.tries, u)
			delete(a.pending, u)
		}
	}
	for u := range a.told {
		if !seen[u] {
			delete(a.told, u)
		}
	}
	return submitted, errors.Join(failed...)
}
