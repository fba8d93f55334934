package coe

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// clusterCreateUnit makes a COE cluster: its first step stores the
// cluster, its default groups and its trust with CREATE_IN_PROGRESS; the
// driver's steps build the control plane; child jobs build the worker
// groups; a health check waits for the API and the nodes; the last step
// records CREATE_COMPLETE.
type clusterCreateUnit struct {
	d        *Deps
	Cluster  *config.COECluster     `json:"cluster"`
	Groups   []*config.COENodeGroup `json:"groups"`
	Trust    *config.COETrust       `json:"trust"`
	Params   driver.Params          `json:"params"`
	Deadline int64                  `json:"deadline"` // unix seconds: create_timeout
	Life     lifecycle              `json:"life"`
}

func (u *clusterCreateUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks("cluster-name:"+op.Str("name"), "quota:"+op.Str("project_id"), u.d.templateLock(op.Str("cluster_template")))
}

func (u *clusterCreateUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	t, err := u.d.Cfg.MustCOETemplate(op.Str("cluster_template"))
	if err != nil {
		return err
	}
	if t.ProjectID != "" && !t.Public && op.Str("project_id") != "" && op.Str("project_id") != t.ProjectID {
		return ecode.Errorf(ecode.NoEnt, "ClusterTemplate %s could not be found.", op.Str("cluster_template"))
	}
	if err := u.d.Cfg.CheckCOENameFree("cluster", op.Str("name"), ""); err != nil {
		return err
	}
	if err := checkQuota(u.d.Cfg, op.Str("project_id")); err != nil {
		return err
	}
	if op.Int("master_count") < 1 {
		return ecode.Errorf(ecode.Inval, "master_count must be 1 or more.")
	}
	if op.Int("master_count")%2 == 0 {
		// etcd, one member per master, needs a majority up: an even
		// count adds a member without tolerating another failure.
		return ecode.Errorf(ecode.Inval, "master_count must be an odd number (1, 3, 5, ...) for etcd's quorum, not %d.", op.Int("master_count"))
	}
	if _, err := u.d.Drivers.Get(t.Driver); err != nil {
		return err
	}
	c, err := newCluster(op, t)
	if err != nil {
		return err
	}
	u.Cluster = c
	u.Groups = []*config.COENodeGroup{
		defaultGroup(c, "default-master", config.COERoleMaster, op.Int("master_count"), c.MasterFlavorID, t.ImageID),
		defaultGroup(c, "default-worker", config.COERoleWorker, op.Int("node_count"), c.FlavorID, t.ImageID),
	}
	u.Trust = &config.COETrust{Meta: config.Meta{UUID: config.NewUUID()}, Cluster: c.UUID, ProjectID: c.ProjectID,
		Trustor: c.UserID, Roles: []string{"member"}}
	c.Trust = u.Trust.UUID
	u.Params = driver.Definition(t, c, u.Groups)
	u.Deadline = u.d.now().Add(time.Duration(op.Int("create_timeout")) * time.Minute).Unix()
	u.Life = lifecycle{Cluster: c.UUID, Action: "CREATE", Groups: []string{u.Groups[0].UUID}, Driver: t.Driver}
	return nil
}

// newCluster is the cluster an op asks for, with CREATE_IN_PROGRESS.
func newCluster(op *opcodes.Op, t *config.COETemplate) (*config.COECluster, error) {
	c := &config.COECluster{ProjectID: op.Str("project_id"), UserID: op.Str("user_id"), Template: t.UUID,
		Keypair: op.Str("keypair"), MasterFlavorID: op.Str("master_flavor_id"), FlavorID: op.Str("flavor_id"),
		CreateTimeout: op.Int("create_timeout"), DiscoveryURL: op.Str("discovery_url"),
		FixedNetwork: op.Str("fixed_network"), FixedSubnet: op.Str("fixed_subnet"),
		Status: config.COECreateInProgress, Driver: t.Driver}
	c.Name = op.Str("name")
	c.UUID = config.NewUUID()
	if id, ok := op.Params["uuid"].(string); ok {
		if _, err := uuid.Parse(id); err != nil {
			return nil, ecode.Errorf(ecode.Inval, "Expected a UUID but received %s.", id)
		}
		c.UUID = id
	}
	if c.Keypair == "" {
		c.Keypair = t.KeypairID
	}
	if v, ok := op.Params["docker_volume_size"].(float64); ok {
		n := int(v)
		c.DockerVolumeSize = &n
	}
	for name, dst := range map[string]**bool{"floating_ip_enabled": &c.FloatingIP, "master_lb_enabled": &c.MasterLB} {
		if b, ok := op.Params[name].(bool); ok {
			*dst = &b
		}
	}
	labels := map[string]string{}
	if op.Bool("merge_labels") {
		maps.Copy(labels, t.Labels)
	}
	if l, ok := op.Params["labels"].(map[string]any); ok {
		for k, v := range l {
			s, ok := v.(string)
			if !ok {
				return nil, ecode.Errorf(ecode.Inval, "label %s must be a string.", k)
			}
			labels[k] = s
		}
	} else if !op.Bool("merge_labels") {
		maps.Copy(labels, t.Labels)
	}
	c.Labels = labels
	return c, nil
}

func defaultGroup(c *config.COECluster, name, role string, count int, flavor, image string) *config.COENodeGroup {
	g := &config.COENodeGroup{ProjectID: c.ProjectID, Cluster: c.UUID, Role: role, IsDefault: true,
		NodeCount: count, MinNodeCount: min(count, 1), FlavorID: flavor, ImageID: image, Labels: maps.Clone(c.Labels),
		Status: config.COECreateInProgress}
	g.Name, g.UUID = name, config.NewUUID()
	return g
}

func (u *clusterCreateUnit) plan() *plannedSteps {
	p := &plannedSteps{}
	p.add(engine.Step{Name: "store the cluster", Run: u.store})
	p.add(u.Life.begin(u.d))
	p.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step { return drv.CreateCluster(u.Params) })
	p.add(engine.Step{Name: "build the worker groups", Run: u.submitGroups})
	p.add(engine.Step{Name: "wait for the worker groups", Run: u.waitGroups})
	p.add(engine.Step{Name: "check the cluster's health", Run: u.healthCheck})
	p.add(u.Life.end(u.d, func(c *config.COECluster) {
		c.HealthStatus, c.HealthStatusReason = config.COEHealthy, nil
	}))
	return p
}

func (u *clusterCreateUnit) Steps() []engine.Step { return u.plan().steps }

func (u *clusterCreateUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	if s.Step() == 0 {
		return
	}
	u.Life.fail(u.d, s, u.plan().cond(s.Step()), failed)
}

func (u *clusterCreateUnit) store(ctx context.Context, s *engine.StepCtx) error {
	tx := s.Tx()
	tx.PutCOECluster(u.Cluster.Clone())
	for _, g := range u.Groups {
		tx.PutCOENodeGroup(g.Clone())
	}
	tx.PutCOETrust(u.Trust.Clone())
	return nil
}

// submitGroups submits one child job per worker group; each brings its
// group to its node count.
func (u *clusterCreateUnit) submitGroups(ctx context.Context, s *engine.StepCtx) error {
	for _, g := range u.Groups {
		if g.Role == config.COERoleMaster {
			continue
		}
		raw, err := json.Marshal(map[string]any{"OP_ID": "OP_COE_NODEGROUP_MODIFY", "cluster": u.Cluster.UUID,
			"nodegroup": g.UUID, "changes": map[string]any{}, "parent_job": s.JobID()})
		if err != nil {
			return ecode.ExecErrorf("encoding the job of group %s: %w", g.Name, err)
		}
		s.Submit([]json.RawMessage{raw})
	}
	return nil
}

// waitGroups waits for the child jobs; a failed one fails the create with
// its group's reason.
func (u *clusterCreateUnit) waitGroups(ctx context.Context, s *engine.StepCtx) error {
	for _, id := range s.ChildJobs() {
		st, err := s.WaitForJob(ctx, id, time.Unix(u.Deadline, 0))
		if err != nil {
			return err
		}
		if st != jobqueue.StatusSuccess {
			why := fmt.Sprintf("job %d ended %s", id, st)
			for _, g := range s.Cfg().COENodeGroups(u.Cluster.UUID) {
				if g.StatusReason != "" && g.Role != config.COERoleMaster {
					why = g.StatusReason
				}
			}
			return ecode.ExecErrorf("building the worker groups failed: %s", why)
		}
	}
	return nil
}

// healthCheck waits, parked, until the API answers and every node of the
// cluster is Ready, or fails at the create's deadline.
func (u *clusterCreateUnit) healthCheck(ctx context.Context, s *engine.StepCtx) error {
	c, err := u.d.load(u.Cluster.UUID)
	if err != nil {
		return err
	}
	drv, err := u.d.Drivers.Get(c.Driver)
	if err != nil {
		return err
	}
	h, err := drv.Monitor(c).Check(ctx)
	problem := ""
	switch {
	case err != nil:
		problem = err.Error()
	default:
		problem = unhealthy(c, h)
	}
	if problem == "" {
		u.d.setCondition(s, c.UUID, config.Condition{Type: "Healthy", Status: config.ConditionTrue, Reason: "Done", Message: "the API and every node are ready"})
		return nil
	}
	deadline := time.Unix(u.Deadline, 0)
	if !u.d.now().Before(deadline) {
		return ecode.ExecErrorf("the cluster was not healthy within its create_timeout: %s", problem)
	}
	return s.Suspend(ctx, minTime(u.d.now().Add(u.d.poll()), deadline), "")
}

// unhealthy says what is wrong with a cluster, "" when nothing is.
func unhealthy(c *driver.Cluster, h driver.Health) string {
	if !h.APIReady {
		return "the API server is not ready"
	}
	ready := map[string]bool{}
	for _, n := range h.Nodes {
		ready[n.Name] = n.Ready
	}
	for _, g := range c.Groups {
		for _, n := range g.Nodes {
			if !ready[n] {
				return "node " + n + " is not ready"
			}
		}
	}
	return ""
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (u *clusterCreateUnit) Result() any { return u.Cluster.UUID }
