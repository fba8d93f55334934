// Package coe runs Kubernetes clusters as a service (Magnum's design
// without Heat): the units of the OP_COE_* opcodes, which corrald runs as
// jobs. A lifecycle job first records the cluster's new Magnum status
// (CREATE_IN_PROGRESS, UPDATE_IN_PROGRESS, DELETE_IN_PROGRESS), visible at
// once, then runs its driver's steps one job step each, recording a
// condition per step in the cluster's status; worker node groups of a new
// cluster are built by child jobs. The last step records *_COMPLETE; a
// failed step records *_FAILED with the step's error as status_reason.
// Every step can run again after a master restart: the driver steps
// re-check what they find, and what they change is stored with the step.
package coe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// Deps is what the units work with.
type Deps struct {
	Cfg     *confdb.DB
	Drivers *driver.Registry
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// PollInterval is how long a job waiting for a cluster to become
	// healthy parks between checks (2s when zero).
	PollInterval time.Duration
}

// DefaultClusterQuota is the clusters a project may have with no quota
// set (Magnum's default max_clusters_per_project).
const DefaultClusterQuota = 20

func (d *Deps) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Deps) poll() time.Duration {
	if d.PollInterval > 0 {
		return d.PollInterval
	}
	return 2 * time.Second
}

// Register adds the units of every OP_COE_* opcode.
func Register(r *engine.Registry, d *Deps) {
	r.Register(
		engine.Op{ID: "OP_COE_TEMPLATE_CREATE", New: func() engine.Unit { return &templateCreateUnit{d: d} }},
		engine.Op{ID: "OP_COE_TEMPLATE_MODIFY", New: func() engine.Unit { return &templateModifyUnit{d: d} }},
		engine.Op{ID: "OP_COE_TEMPLATE_REMOVE", New: func() engine.Unit { return &templateRemoveUnit{d: d} }},
		engine.Op{ID: "OP_COE_CLUSTER_CREATE", New: func() engine.Unit { return &clusterCreateUnit{d: d} }},
		engine.Op{ID: "OP_COE_CLUSTER_MODIFY", New: func() engine.Unit { return &resizeUnit{d: d, modify: true} }},
		engine.Op{ID: "OP_COE_CLUSTER_RESIZE", New: func() engine.Unit { return &resizeUnit{d: d} }},
		engine.Op{ID: "OP_COE_CLUSTER_UPGRADE", New: func() engine.Unit { return &upgradeUnit{d: d} }},
		engine.Op{ID: "OP_COE_CLUSTER_REMOVE", New: func() engine.Unit { return &clusterRemoveUnit{clusterAction{d: d}} }},
		engine.Op{ID: "OP_COE_CLUSTER_SET_HEALTH", New: func() engine.Unit { return &setHealthUnit{d: d} }},
		engine.Op{ID: "OP_COE_CLUSTER_HEAL", New: func() engine.Unit { return &healUnit{clusterAction: clusterAction{d: d}} }},
		engine.Op{ID: "OP_COE_CA_ROTATE", New: func() engine.Unit { return &caRotateUnit{clusterAction{d: d}} }},
		engine.Op{ID: "OP_COE_NODEGROUP_CREATE", New: func() engine.Unit { return &nodeGroupCreateUnit{clusterAction: clusterAction{d: d}} }},
		engine.Op{ID: "OP_COE_NODEGROUP_MODIFY", New: func() engine.Unit { return &resizeUnit{d: d, group: true} }},
		engine.Op{ID: "OP_COE_NODEGROUP_REMOVE", New: func() engine.Unit { return &nodeGroupRemoveUnit{clusterAction: clusterAction{d: d}} }},
		engine.Op{ID: "OP_COE_QUOTA_SET", New: func() engine.Unit { return &quotaSetUnit{d: d} }},
		engine.Op{ID: "OP_COE_QUOTA_REMOVE", New: func() engine.Unit { return &quotaRemoveUnit{d: d} }},
		engine.Op{ID: "OP_COE_FEDERATION_CREATE", New: func() engine.Unit { return &federationCreateUnit{d: d} }},
		engine.Op{ID: "OP_COE_FEDERATION_MODIFY", New: func() engine.Unit { return &federationModifyUnit{d: d} }},
		engine.Op{ID: "OP_COE_FEDERATION_REMOVE", New: func() engine.Unit { return &federationRemoveUnit{d: d} }},
		engine.Op{ID: "OP_COE_TRUST_REVOKE", New: func() engine.Unit { return &trustRevokeUnit{d: d} }},
	)
}

// coeLocks are the cluster lock shared and the named COE locks
// exclusively.
func coeLocks(names ...string) []locking.Request {
	return []locking.Request{
		{Level: locking.LevelCluster, Mode: locking.Shared, Names: []string{locking.BGL}},
		{Level: locking.LevelCOE, Mode: locking.Exclusive, Names: names},
	}
}

// clusterLock names the lock of the cluster op names (its uuid when
// known, else the name given; Prereq then reports it missing).
func (d *Deps) clusterLock(ident string) string {
	if c, ok := d.Cfg.COECluster(ident); ok {
		return c.UUID
	}
	return ident
}

// Reservation is how a cluster's status names the job working on it.
func Reservation(jobID int64) string { return engine.Reservation(jobID) }

// checkIdle refuses a cluster another job is changing, unless that job is
// parent (the job building the cluster, for its child jobs).
func (d *Deps) checkIdle(c *config.COECluster, parent int64) error {
	if !strings.HasSuffix(c.Status, "_IN_PROGRESS") {
		return nil
	}
	if parent != 0 {
		if st := d.Cfg.COEClusterStatus(c.UUID); st != nil && st.Target == Reservation(parent) {
			return nil
		}
	}
	return ecode.Errorf(ecode.State, "Cluster %s is in %s; retry once that is done.", c.UUID, c.Status)
}

// checkTrust refuses background work for a cluster whose trust was
// revoked.
func (d *Deps) checkTrust(c *config.COECluster) error {
	if c.Trust == "" {
		return nil
	}
	t, ok := d.Cfg.COETrust(c.Trust)
	if !ok || t.Revoked {
		return ecode.Errorf(ecode.State, "The trust of cluster %s was revoked: no work is done for it on the owner's behalf.", c.UUID)
	}
	return nil
}

// checkProject refuses a caller of another project (an empty project is
// the administrator's, who sees everything).
func checkProject(op *opcodes.Op, owner, what, ident string) error {
	if p := op.Str("project_id"); p != "" && owner != "" && p != owner {
		return ecode.Errorf(ecode.NoEnt, "%s %s could not be found.", what, ident)
	}
	return nil
}

// cluster reads a cluster and its driver for a unit's Prereq.
func (d *Deps) cluster(op *opcodes.Op) (*config.COECluster, driver.Driver, error) {
	c, err := d.Cfg.MustCOECluster(op.Str("cluster"))
	if err != nil {
		return nil, nil, err
	}
	if err := checkProject(op, c.ProjectID, "Cluster", op.Str("cluster")); err != nil {
		return nil, nil, err
	}
	drv, err := d.Drivers.Get(c.Driver)
	if err != nil {
		return nil, nil, err
	}
	return c, drv, nil
}

// load reads a cluster as a driver step sees it.
func (d *Deps) load(uuid string) (*driver.Cluster, error) {
	c, ok := d.Cfg.COECluster(uuid)
	if !ok {
		return nil, ecode.ExecErrorf("cluster %s was removed during the job", uuid)
	}
	t, ok := d.Cfg.COETemplate(c.Template)
	if !ok {
		return nil, ecode.ExecErrorf("the template %s of cluster %s is gone", c.Template, uuid)
	}
	dc := &driver.Cluster{COECluster: c, Template: t, Groups: d.Cfg.COENodeGroups(uuid)}
	if ca, ok := d.Cfg.COECertificate(uuid); ok {
		dc.CA = ca
	}
	return dc, nil
}

// params are a cluster's driver parameters now.
func (d *Deps) params(c *config.COECluster) (driver.Params, error) {
	t, ok := d.Cfg.COETemplate(c.Template)
	if !ok {
		return driver.Params{}, ecode.Errorf(ecode.NoEnt, "ClusterTemplate %s could not be found.", c.Template)
	}
	return driver.Definition(t, c, d.Cfg.COENodeGroups(c.UUID)), nil
}

// save stores what a driver step changed, in the step's transaction.
func save(s *engine.StepCtx, c *driver.Cluster) {
	tx := s.Tx()
	tx.PutCOECluster(c.COECluster)
	for _, g := range c.Groups {
		tx.PutCOENodeGroup(g)
	}
	if c.CA != nil {
		tx.PutCOECertificate(c.CA)
	}
}

// setCondition records a step's condition in the cluster's status.
func (d *Deps) setCondition(s *engine.StepCtx, uuid string, cond config.Condition) {
	st, changed := config.ChangeStatus(d.Cfg.COEClusterStatus(uuid), func(st *config.Status, now time.Time) {
		st.SetCondition(cond, now)
	}, d.now())
	if changed {
		s.Tx().PutCOEClusterStatus(uuid, st)
	}
}

// setReservation records (job != 0) or clears the job working on the
// cluster.
func (d *Deps) setReservation(tx *confdb.Tx, uuid string, job int64) {
	target := ""
	if job != 0 {
		target = Reservation(job)
	}
	st, changed := config.ChangeStatus(d.Cfg.COEClusterStatus(uuid), func(st *config.Status, now time.Time) {
		st.Target = target
	}, d.now())
	if changed {
		tx.PutCOEClusterStatus(uuid, st)
	}
}

// stepEnv is the engine's step as a driver's Env.
type stepEnv struct {
	s *engine.StepCtx
}

func (e stepEnv) Nodes() []*config.Node {
	var out []*config.Node
	for _, n := range e.s.Cfg().Nodes() {
		if !n.Offline {
			out = append(out, n)
		}
	}
	return out
}

func (e stepEnv) RPC(ctx context.Context, node *config.Node, method string, args, reply any) error {
	return e.s.RPC(ctx, node, method, args, reply)
}

func (e stepEnv) Logf(ctx context.Context, format string, args ...any) {
	e.s.Logf(ctx, format, args...)
}

func (e stepEnv) Park(ctx context.Context, until time.Time) error {
	return e.s.Suspend(ctx, until, "")
}

// Cfg implements driver.Store.
func (e stepEnv) Cfg() *confdb.DB { return e.s.Cfg() }

// Submit implements driver.Store: the child job is created with the
// step's commit.
func (e stepEnv) Submit(ops []map[string]any) error {
	job := make([]json.RawMessage, len(ops))
	for i, op := range ops {
		b, err := json.Marshal(op)
		if err != nil {
			return ecode.ExecErrorf("encoding a child job's %v: %w", op["OP_ID"], err)
		}
		job[i] = b
	}
	e.s.Submit(job)
	return nil
}

// PodSubnet implements driver.Env.
func (e stepEnv) PodSubnet(host *config.Node, owner string) (netip.Prefix, error) {
	var avoid []netip.Addr
	for _, ip := range []string{host.PrimaryIP, host.SecondaryIP} {
		if a, err := netip.ParseAddr(ip); err == nil {
			avoid = append(avoid, a)
		}
	}
	return e.s.Cfg().FreeCOEPodSubnet(host.UUID, owner, avoid)
}

// driverStep runs a driver step on a cluster as a job step: it reads the
// cluster, refuses a revoked trust, runs the step, stores what it changed
// and records its condition.
func (d *Deps) driverStep(uuid string, ds driver.Step) engine.Step {
	return engine.Step{Name: ds.Name, Run: func(ctx context.Context, s *engine.StepCtx) error {
		c, err := d.load(uuid)
		if err != nil {
			return err
		}
		if err := d.checkTrust(c.COECluster); err != nil {
			return err
		}
		if err := ds.Run(ctx, stepEnv{s}, c); err != nil {
			return fmt.Errorf("%s: %w", ds.Name, err)
		}
		save(s, c)
		d.setCondition(s, uuid, config.Condition{Type: ds.Condition, Status: config.ConditionTrue, Reason: "Done", Message: ds.Name})
		return nil
	}}
}

// reason is a failure as status_reason shows it.
func reason(err error) string {
	if e, ok := ecode.As(err); ok {
		return e.Msg
	}
	return err.Error()
}
