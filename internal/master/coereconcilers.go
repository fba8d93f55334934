package master

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
)

// The COE clusters' reconcilers: they read each cluster through its
// driver's monitor and act only through jobs, one per cluster at a time.
const (
	reconcilerCOEHealth   = "coe-health"
	reconcilerCOEAutoheal = "coe-autoheal"
)

// DefaultAutoHealThreshold is how long a kube node may stay NotReady
// before auto-healing replaces it (label auto_healing_threshold).
const DefaultAutoHealThreshold = 60 * time.Second

// coeMonitorTimeout bounds one cluster's health check in a round.
const coeMonitorTimeout = 20 * time.Second

// perCOECluster adapts a round that may submit one job per COE cluster:
// plan returns the op for a cluster, or nil. A cluster whose last job of
// this reconciler has not ended is left for a later round; a failed job is
// the round's error.
func (d *Daemon) perCOECluster(name, why string, plan func(ctx context.Context, c *config.COECluster) (map[string]any, error)) func(context.Context) (int, error) {
	last := map[string]int64{} // cluster uuid -> job; rounds never overlap
	return func(ctx context.Context) (int, error) {
		if d.queue.Drained() {
			return 0, nil
		}
		var errs []error
		n := 0
		seen := map[string]bool{}
		for _, c := range d.cfg.COEClusters() {
			seen[c.UUID] = true
			if id := last[c.UUID]; id != 0 {
				done, failure := d.jobDone(ctx, id)
				if !done {
					continue
				}
				if failure != "" {
					errs = append(errs, fmt.Errorf("job %d for cluster %s failed: %s", id, c.Name, failure))
				}
				delete(last, c.UUID)
			}
			op, err := plan(ctx, c)
			if err != nil {
				errs = append(errs, fmt.Errorf("cluster %s: %w", c.Name, err))
				continue
			}
			if op == nil {
				continue
			}
			id, err := d.submitReconcilerJob(ctx, name, why, op)
			if err != nil {
				errs = append(errs, fmt.Errorf("submitting %s for cluster %s: %w", op["OP_ID"], c.Name, err))
				continue
			}
			last[c.UUID] = id
			n++
			d.log.Info("reconciler submitted a job", "reconciler", name, "job", id, "opcode", op["OP_ID"], "cluster", c.Name)
		}
		for uuid := range last {
			if !seen[uuid] {
				delete(last, uuid)
			}
		}
		return n, errors.Join(errs...)
	}
}

// coeWatched is a cluster as a reconciler's monitor sees it, with its
// driver; ok is false for a cluster no reconciler acts on: one a job is
// changing, one that failed or is being deleted, one whose trust was
// revoked.
func (d *Daemon) coeWatched(c *config.COECluster) (drv driver.Driver, dc *driver.Cluster, ok bool) {
	if !strings.HasSuffix(c.Status, "_COMPLETE") || strings.HasPrefix(c.Status, "DELETE") {
		return nil, nil, false
	}
	if c.Trust != "" {
		if t, found := d.cfg.COETrust(c.Trust); !found || t.Revoked {
			return nil, nil, false
		}
	}
	t, found := d.cfg.COETemplate(c.Template)
	if !found {
		return nil, nil, false
	}
	drv, err := d.coe.Drivers.Get(c.Driver)
	if err != nil {
		return nil, nil, false
	}
	dc = &driver.Cluster{COECluster: c, Template: t, Groups: d.cfg.COENodeGroups(c.UUID)}
	if ca, found := d.cfg.COECertificate(c.UUID); found {
		dc.CA = ca
	}
	return drv, dc, true
}

// planCOEHealth reads a cluster's health and submits
// OP_COE_CLUSTER_SET_HEALTH when what it sees differs from what is
// recorded: HEALTHY when the API server is ready and every node of its
// groups is Ready, else UNHEALTHY with what is not (Magnum's reasons:
// "api" and "<node>.Ready").
func (d *Daemon) planCOEHealth(ctx context.Context, c *config.COECluster) (map[string]any, error) {
	drv, dc, ok := d.coeWatched(c)
	if !ok {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, coeMonitorTimeout)
	defer cancel()
	h, err := drv.Monitor(dc).Check(ctx)
	status, reason := coeHealth(dc, h, err)
	if status == c.HealthStatus && maps.Equal(reason, c.HealthStatusReason) {
		return nil, nil
	}
	return map[string]any{"OP_ID": "OP_COE_CLUSTER_SET_HEALTH", "cluster": c.UUID,
		"health_status": status, "health_status_reason": reason}, nil
}

// coeHealth is a cluster's health from what its monitor saw.
func coeHealth(dc *driver.Cluster, h driver.Health, err error) (string, map[string]string) {
	reason := map[string]string{}
	switch {
	case err != nil:
		reason["api"] = err.Error()
		return config.COEUnhealthy, reason
	case !h.APIReady:
		reason["api"] = "the API server is not ready"
		return config.COEUnhealthy, reason
	}
	reason["api"] = "ok"
	ready := map[string]bool{}
	for _, n := range h.Nodes {
		ready[n.Name] = n.Ready
	}
	status := config.COEHealthy
	for _, g := range dc.Groups {
		for _, n := range g.Nodes {
			reason[n+".Ready"] = strconv.FormatBool(ready[n])
			if !ready[n] {
				status = config.COEUnhealthy
			}
		}
	}
	return status, reason
}

// planCOEAutoheal replaces, in a cluster with auto_healing_enabled, the
// worker nodes NotReady for longer than auto_healing_threshold (or not
// seen at all), at most auto_healing_max_count at a time, with
// OP_COE_CLUSTER_HEAL.
func (d *Daemon) planCOEAutoheal(ctx context.Context, c *config.COECluster) (map[string]any, error) {
	drv, dc, ok := d.coeWatched(c)
	if !ok {
		return nil, nil
	}
	p := driver.Definition(dc.Template, c, dc.Groups)
	if !p.AutoHealing || p.AutoHealingMaxCount == 0 {
		return nil, nil
	}
	threshold := autoHealThreshold(p.Labels["auto_healing_threshold"])
	ctx, cancel := context.WithTimeout(ctx, coeMonitorTimeout)
	defer cancel()
	h, err := drv.Monitor(dc).Check(ctx)
	if err != nil || !h.APIReady {
		return nil, nil // the API server is not there to heal through; health says so
	}
	bad := unhealthyNodes(dc, h, time.Now(), threshold)
	if len(bad) == 0 {
		return nil, nil
	}
	if len(bad) > p.AutoHealingMaxCount {
		bad = bad[:p.AutoHealingMaxCount]
	}
	return map[string]any{"OP_ID": "OP_COE_CLUSTER_HEAL", "cluster": c.UUID, "nodes": bad}, nil
}

// autoHealThreshold reads the label: a Go duration ("90s") or seconds.
func autoHealThreshold(s string) time.Duration {
	return autoHealThresholdOr(s, DefaultAutoHealThreshold)
}

// autoHealThresholdOr reads a duration label, a Go duration or seconds;
// def when empty or invalid.
func autoHealThresholdOr(s string, def time.Duration) time.Duration {
	if dur, err := time.ParseDuration(s); err == nil && dur >= 0 {
		return dur
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	return def
}

// unhealthyNodes are the worker nodes to replace, sorted: not Ready since
// longer than threshold, or missing from the cluster.
func unhealthyNodes(dc *driver.Cluster, h driver.Health, now time.Time, threshold time.Duration) []string {
	seen := map[string]driver.KubeNode{}
	for _, n := range h.Nodes {
		seen[n.Name] = n
	}
	var bad []string
	for _, g := range dc.Groups {
		if g.Role == config.COERoleMaster {
			continue
		}
		for _, name := range g.Nodes {
			n, ok := seen[name]
			if !ok || (!n.Ready && now.Sub(n.Since) >= threshold) {
				bad = append(bad, name)
			}
		}
	}
	slices.Sort(bad)
	return bad
}
