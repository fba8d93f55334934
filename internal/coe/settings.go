package coe

import (
	"context"
	"maps"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// quotaSetUnit sets a project's hard limit (POST creates, PATCH changes).
type quotaSetUnit struct {
	d     *Deps
	Quota *config.COEQuota `json:"quota"`
}

func (u *quotaSetUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks("quota:" + op.Str("project_id"))
}

func (u *quotaSetUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	project, res := op.Str("project_id"), op.Str("resource")
	if res != "Cluster" {
		return ecode.Errorf(ecode.Inval, "Invalid resource %s: only Cluster has a quota.", res)
	}
	q, exists := u.d.Cfg.COEQuota(project, res)
	switch {
	case exists && op.Bool("create"):
		return ecode.Errorf(ecode.Exists, "Quota for project %s already exists for resource %s.", project, res)
	case !exists && !op.Bool("create"):
		return ecode.Errorf(ecode.NoEnt, "Quota could not be found for project %s and resource %s.", project, res)
	case !exists:
		q = &config.COEQuota{ProjectID: project, Resource: res}
	}
	q.HardLimit = op.Int("hard_limit")
	u.Quota = q
	return nil
}

func (u *quotaSetUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "set the quota", Run: func(ctx context.Context, s *engine.StepCtx) error {
		q := u.Quota.Clone()
		if cur, ok := u.d.Cfg.COEQuota(q.ProjectID, q.Resource); ok {
			cur.HardLimit = q.HardLimit
			q = cur
		}
		s.Tx().PutCOEQuota(q)
		return nil
	}}}
}

func (u *quotaSetUnit) Result() any { return nil }

type quotaRemoveUnit struct {
	d                 *Deps
	Project, Resource string
}

func (u *quotaRemoveUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks("quota:" + op.Str("project_id"))
}

func (u *quotaRemoveUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	u.Project, u.Resource = op.Str("project_id"), op.Str("resource")
	if _, ok := u.d.Cfg.COEQuota(u.Project, u.Resource); !ok {
		return ecode.Errorf(ecode.NoEnt, "Quota could not be found for project %s and resource %s.", u.Project, u.Resource)
	}
	return nil
}

func (u *quotaRemoveUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "remove the quota", Run: func(ctx context.Context, s *engine.StepCtx) error {
		if q, ok := u.d.Cfg.COEQuota(u.Project, u.Resource); ok {
			s.Tx().DeleteCOEQuota(q)
		}
		return nil
	}}}
}

func (u *quotaRemoveUnit) Result() any { return nil }

// checkQuota refuses a new cluster past the project's Cluster quota (or
// the default), with Magnum's message and a class the API answers 403.
func checkQuota(cfg *confdb.DB, project string) error {
	limit := DefaultClusterQuota
	if q, ok := cfg.COEQuota(project, "Cluster"); ok {
		limit = q.HardLimit
	}
	n := 0
	for _, c := range cfg.COEClusters() {
		if c.ProjectID == project {
			n++
		}
	}
	if n >= limit {
		return ecode.Errorf(ecode.Quota, "Resource limit exceeded: You have reached the maximum clusters per project, %d. You may delete a cluster to make room for a new one.", limit)
	}
	return nil
}

// setHealthUnit records what the health monitor saw.
type setHealthUnit struct {
	d      *Deps
	UUID   string            `json:"uuid"`
	Health string            `json:"health"`
	Reason map[string]string `json:"reason"`
}

func (u *setHealthUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks(u.d.clusterLock(op.Str("cluster")))
}

func (u *setHealthUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	c, err := u.d.Cfg.MustCOECluster(op.Str("cluster"))
	if err != nil {
		return err
	}
	u.UUID, u.Health = c.UUID, op.Str("health_status")
	switch u.Health {
	case config.COEHealthy, config.COEUnhealthy, config.COEHealthUnknown:
	default:
		return ecode.Errorf(ecode.Inval, "health_status must be HEALTHY, UNHEALTHY or UNKNOWN, not %q.", u.Health)
	}
	if r, ok := op.Params["health_status_reason"].(map[string]any); ok {
		u.Reason = map[string]string{}
		for k, v := range r {
			s, ok := v.(string)
			if !ok {
				return ecode.Errorf(ecode.Inval, "health_status_reason %s must be a string.", k)
			}
			u.Reason[k] = s
		}
	}
	return nil
}

func (u *setHealthUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "record the health", Run: func(ctx context.Context, s *engine.StepCtx) error {
		c, ok := u.d.Cfg.COECluster(u.UUID)
		if !ok || (c.HealthStatus == u.Health && maps.Equal(c.HealthStatusReason, u.Reason)) {
			return nil
		}
		c.HealthStatus, c.HealthStatusReason = u.Health, u.Reason
		s.Tx().PutCOECluster(c)
		return nil
	}}}
}

func (u *setHealthUnit) Result() any { return nil }

// TrustRevokedReason is the health reason a cluster with a revoked trust
// shows: nothing acts on it in the background any more.
const TrustRevokedReason = "the cluster's trust was revoked: health checks, auto-healing and auto-scaling are stopped"

// trustRevokeUnit revokes a cluster's trust: background work stops.
type trustRevokeUnit struct {
	d    *Deps
	UUID string `json:"uuid"`
}

func (u *trustRevokeUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks(u.d.clusterLock(op.Str("cluster")))
}

func (u *trustRevokeUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	c, err := u.d.Cfg.MustCOECluster(op.Str("cluster"))
	if err != nil {
		return err
	}
	if _, ok := u.d.Cfg.COETrust(c.Trust); !ok {
		return ecode.Errorf(ecode.NoEnt, "Cluster %s has no trust.", c.UUID)
	}
	u.UUID = c.UUID
	return nil
}

func (u *trustRevokeUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "revoke the trust", Run: func(ctx context.Context, s *engine.StepCtx) error {
		c, ok := u.d.Cfg.COECluster(u.UUID)
		if !ok {
			return nil
		}
		if t, ok := u.d.Cfg.COETrust(c.Trust); ok && !t.Revoked {
			t.Revoked = true
			s.Tx().PutCOETrust(t)
		}
		c.HealthStatus = config.COEHealthUnknown
		c.HealthStatusReason = map[string]string{"trust": TrustRevokedReason}
		s.Tx().PutCOECluster(c)
		return nil
	}}}
}

func (u *trustRevokeUnit) Result() any { return nil }
