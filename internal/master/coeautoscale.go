package master

import (
	"context"
	"sync"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
)

const reconcilerCOEAutoscale = "coe-autoscale"

// DefaultScaleDownDelay is how long a worker node must stay without pods
// before the autoscaler removes it (label autoscaler_scale_down_delay).
const DefaultScaleDownDelay = 2 * time.Minute

// coeAutoscaler sizes the default worker group of clusters labelled
// auto_scaling_enabled=true, as the cluster autoscaler Magnum deploys
// does: pods no node can take add a node, a node without pods for the
// scale-down delay goes, within min_node_count..max_node_count (the
// labels', narrowed by the group's own). One node per round, through
// OP_COE_NODEGROUP_MODIFY, whose unit picks the node to remove (NotReady
// or empty first).
type coeAutoscaler struct {
	d     *Daemon
	now   func() time.Time
	mu    sync.Mutex
	empty map[string]time.Time // "<cluster>/<node>" -> first seen without pods
}

func newCOEAutoscaler(d *Daemon) *coeAutoscaler {
	return &coeAutoscaler{d: d, now: time.Now, empty: map[string]time.Time{}}
}

func (a *coeAutoscaler) plan(ctx context.Context, c *config.COECluster) (map[string]any, error) {
	drv, dc, ok := a.d.coeWatched(c)
	if !ok {
		return nil, nil
	}
	p := driver.Definition(dc.Template, c, dc.Groups)
	if !p.AutoScaling {
		return nil, nil
	}
	var g *config.COENodeGroup
	for _, x := range dc.Groups {
		if x.IsDefault && x.Role == config.COERoleWorker {
			g = x
		}
	}
	if g == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, coeMonitorTimeout)
	defer cancel()
	h, err := drv.Monitor(dc).Check(ctx)
	if err != nil || !h.APIReady {
		return nil, nil
	}
	lo, hi := max(p.MinNodeCount, g.MinNodeCount), p.MaxNodeCount
	if g.MaxNodeCount != nil {
		hi = min(hi, *g.MaxNodeCount)
	}
	want := scaleTarget(g, h, lo, hi, a.emptySince(c.UUID, g, h), a.now(), scaleDownDelay(p.Labels["autoscaler_scale_down_delay"]))
	if want == g.NodeCount {
		return nil, nil
	}
	return map[string]any{"OP_ID": "OP_COE_NODEGROUP_MODIFY", "cluster": c.UUID, "nodegroup": g.UUID,
		"changes": map[string]any{"node_count": want}}, nil
}

// emptySince records when each of the group's nodes was first seen
// without pods (a node with pods starts over) and returns the records.
func (a *coeAutoscaler) emptySince(cluster string, g *config.COENodeGroup, h driver.Health) map[string]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	pods := map[string]int{}
	for _, n := range h.Nodes {
		pods[n.Name] = n.Pods
	}
	out := map[string]time.Time{}
	for _, n := range g.Nodes {
		key := cluster + "/" + n
		if pods[n] > 0 {
			delete(a.empty, key)
			continue
		}
		if _, ok := a.empty[key]; !ok {
			a.empty[key] = a.now()
		}
		out[n] = a.empty[key]
	}
	return out
}

// scaleTarget is the group's next node_count: one more while pods wait
// for a node, one less once a node has had no pods for delay (and none
// wait), always within lo..hi.
func scaleTarget(g *config.COENodeGroup, h driver.Health, lo, hi int, emptySince map[string]time.Time, now time.Time, delay time.Duration) int {
	n := g.NodeCount
	switch {
	case n < lo:
		return lo
	case n > hi:
		return hi
	case h.PendingPods > 0:
		return min(n+1, hi)
	}
	for _, since := range emptySince {
		if now.Sub(since) >= delay && n > lo {
			return n - 1
		}
	}
	return n
}

func scaleDownDelay(s string) time.Duration {
	if s == "" {
		return DefaultScaleDownDelay
	}
	return autoHealThresholdOr(s, DefaultScaleDownDelay)
}
