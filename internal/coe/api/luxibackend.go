package api

import (
	"context"
	"os"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// NewLuxiBackend is the backend that asks corrald: queries through the
// coewire methods, every change as an OP_COE_* job through COESubmit,
// which answers once the op is under way or with its error. The policy
// (policy.go) is applied here: corrald's opcodes name objects by uuid
// once the caller is known to see them.
func NewLuxiBackend(pool *apifront.LuxiPool) Backend { return &luxiBackend{pool: pool} }

type luxiBackend struct{ pool *apifront.LuxiPool }

func (b *luxiBackend) call(ctx context.Context, method string, args []any, out any) error {
	return b.pool.Do(ctx, func(c *luxi.Client) error { return c.Call(ctx, method, args, out) })
}

func (b *luxiBackend) submit(ctx context.Context, op map[string]any) error {
	var r coewire.SubmitReply
	return b.call(ctx, coewire.MethodSubmit, []any{op}, &r)
}

// actingProject is the project an op on an object of project runs for:
// the caller's, or for an administrator the object's owner, so the units'
// ownership checks hold.
func actingProject(who Caller, project string) string {
	if who.Admin && project != "" {
		return project
	}
	return who.Project
}

func (b *luxiBackend) templates(ctx context.Context, names []string) ([]*config.COETemplate, error) {
	var out []*config.COETemplate
	err := b.call(ctx, coewire.MethodTemplates, []any{names}, &out)
	return out, err
}

func (b *luxiBackend) ListTemplates(ctx context.Context, who Caller) ([]*config.COETemplate, error) {
	all, err := b.templates(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, t := range all {
		if SeesTemplate(who, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (b *luxiBackend) GetTemplate(ctx context.Context, who Caller, ident string) (*config.COETemplate, error) {
	ts, err := b.templates(ctx, []string{ident})
	if ecode.ClassOf(err) == ecode.NoEnt || (err == nil && (len(ts) != 1 || !SeesTemplate(who, ts[0]))) {
		return nil, ErrTemplateNotFound(ident)
	}
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

func (b *luxiBackend) CreateTemplate(ctx context.Context, who Caller, name, uuid string, fields map[string]any) (*config.COETemplate, error) {
	op := map[string]any{"OP_ID": "OP_COE_TEMPLATE_CREATE", "name": name, "uuid": uuid, "fields": fields,
		"project_id": who.Project, "user_id": who.User}
	if err := b.submit(ctx, op); err != nil {
		return nil, err
	}
	return b.GetTemplate(ctx, who, uuid)
}

// ownTemplate finds a template the caller may change.
func (b *luxiBackend) ownTemplate(ctx context.Context, who Caller, ident, action string) (*config.COETemplate, error) {
	t, err := b.GetTemplate(ctx, who, ident)
	if err != nil {
		return nil, err
	}
	if !Owns(who, t.ProjectID) {
		return nil, ErrForbidden(action)
	}
	return t, nil
}

func (b *luxiBackend) UpdateTemplate(ctx context.Context, who Caller, ident string, changes map[string]any) (*config.COETemplate, error) {
	t, err := b.ownTemplate(ctx, who, ident, "clustertemplate:update")
	if err != nil {
		return nil, err
	}
	op := map[string]any{"OP_ID": "OP_COE_TEMPLATE_MODIFY", "cluster_template": t.UUID, "changes": changes,
		"project_id": actingProject(who, t.ProjectID)}
	if err := b.submit(ctx, op); err != nil {
		return nil, err
	}
	return b.GetTemplate(ctx, who, t.UUID)
}

func (b *luxiBackend) DeleteTemplate(ctx context.Context, who Caller, ident string) error {
	t, err := b.ownTemplate(ctx, who, ident, "clustertemplate:delete")
	if err != nil {
		return err
	}
	return b.submit(ctx, map[string]any{"OP_ID": "OP_COE_TEMPLATE_REMOVE", "cluster_template": t.UUID,
		"project_id": actingProject(who, t.ProjectID)})
}

func (b *luxiBackend) clusters(ctx context.Context, names []string) ([]*Cluster, error) {
	var recs []coewire.ClusterRecord
	if err := b.call(ctx, coewire.MethodClusters, []any{names}, &recs); err != nil {
		return nil, err
	}
	out := make([]*Cluster, 0, len(recs))
	for _, r := range recs {
		out = append(out, &Cluster{COECluster: r.Cluster, NodeGroups: r.NodeGroups, TemplateLabels: r.TemplateLabels})
	}
	return out, nil
}

func (b *luxiBackend) ListClusters(ctx context.Context, who Caller) ([]*Cluster, error) {
	all, err := b.clusters(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, c := range all {
		if Owns(who, c.ProjectID) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (b *luxiBackend) GetCluster(ctx context.Context, who Caller, ident string) (*Cluster, error) {
	cs, err := b.clusters(ctx, []string{ident})
	if ecode.ClassOf(err) == ecode.NoEnt || (err == nil && (len(cs) != 1 || !Owns(who, cs[0].ProjectID))) {
		return nil, ErrClusterNotFound(ident)
	}
	if err != nil {
		return nil, err
	}
	return cs[0], nil
}

func (b *luxiBackend) CreateCluster(ctx context.Context, who Caller, cc ClusterCreate) error {
	t, err := b.GetTemplate(ctx, who, cc.Template)
	if err != nil {
		return ecode.Errorf(ecode.Inval, "ClusterTemplate %s could not be found.", cc.Template)
	}
	op := map[string]any{"OP_ID": "OP_COE_CLUSTER_CREATE", "name": cc.Name, "uuid": cc.UUID,
		"cluster_template": t.UUID, "project_id": who.Project, "user_id": who.User}
	for k, v := range cc.Params {
		op[k] = v
	}
	return b.submit(ctx, op)
}

// clusterOp submits an op on a cluster the caller sees and returns the
// cluster's uuid.
func (b *luxiBackend) clusterOp(ctx context.Context, who Caller, ident string, op map[string]any) (string, error) {
	c, err := b.GetCluster(ctx, who, ident)
	if err != nil {
		return "", err
	}
	op["cluster"], op["project_id"] = c.UUID, actingProject(who, c.ProjectID)
	return c.UUID, b.submit(ctx, op)
}

func (b *luxiBackend) UpdateCluster(ctx context.Context, who Caller, ident string, changes map[string]any, rollback bool) (string, error) {
	return b.clusterOp(ctx, who, ident, map[string]any{"OP_ID": "OP_COE_CLUSTER_MODIFY", "changes": changes, "rollback": rollback})
}

func (b *luxiBackend) ResizeCluster(ctx context.Context, who Caller, ident string, r Resize) (string, error) {
	op := map[string]any{"OP_ID": "OP_COE_CLUSTER_RESIZE", "node_count": r.NodeCount, "nodes_to_remove": listOf(r.NodesToRemove)}
	if r.NodeGroup != "" {
		op["nodegroup"] = r.NodeGroup
	}
	return b.clusterOp(ctx, who, ident, op)
}

func (b *luxiBackend) UpgradeCluster(ctx context.Context, who Caller, ident string, u Upgrade) (string, error) {
	t, err := b.GetTemplate(ctx, who, u.Template)
	if err != nil {
		return "", err
	}
	op := map[string]any{"OP_ID": "OP_COE_CLUSTER_UPGRADE", "cluster_template": t.UUID, "max_batch_size": u.MaxBatchSize}
	if u.NodeGroup != "" {
		op["nodegroup"] = u.NodeGroup
	}
	return b.clusterOp(ctx, who, ident, op)
}

func (b *luxiBackend) DeleteCluster(ctx context.Context, who Caller, ident string) error {
	_, err := b.clusterOp(ctx, who, ident, map[string]any{"OP_ID": "OP_COE_CLUSTER_REMOVE"})
	return err
}

func (b *luxiBackend) nodeGroups(ctx context.Context, who Caller, cluster string, names []string) (*Cluster, []*config.COENodeGroup, error) {
	c, err := b.GetCluster(ctx, who, cluster)
	if err != nil {
		return nil, nil, err
	}
	var out []*config.COENodeGroup
	err = b.call(ctx, coewire.MethodNodeGroups, []any{coewire.NodeGroupArgs{Cluster: c.UUID, Names: names}}, &out)
	return c, out, err
}

func (b *luxiBackend) ListNodeGroups(ctx context.Context, who Caller, cluster, role string) ([]*config.COENodeGroup, error) {
	_, gs, err := b.nodeGroups(ctx, who, cluster, nil)
	if err != nil {
		return nil, err
	}
	out := gs[:0]
	for _, g := range gs {
		if role == "" || g.Role == role {
			out = append(out, g)
		}
	}
	return out, nil
}

func (b *luxiBackend) GetNodeGroup(ctx context.Context, who Caller, cluster, ident string) (*config.COENodeGroup, error) {
	_, gs, err := b.nodeGroups(ctx, who, cluster, []string{ident})
	if err != nil {
		return nil, err
	}
	if len(gs) != 1 {
		return nil, ErrNodeGroupNotFound(ident)
	}
	return gs[0], nil
}

func (b *luxiBackend) CreateNodeGroup(ctx context.Context, who Caller, cluster string, g NodeGroupCreate) (*config.COENodeGroup, error) {
	op := map[string]any{"OP_ID": "OP_COE_NODEGROUP_CREATE", "name": g.Name, "uuid": g.UUID}
	for k, v := range g.Params {
		op[k] = v
	}
	c, err := b.clusterOp(ctx, who, cluster, op)
	if err != nil {
		return nil, err
	}
	return b.GetNodeGroup(ctx, who, c, g.UUID)
}

func (b *luxiBackend) UpdateNodeGroup(ctx context.Context, who Caller, cluster, ident string, changes map[string]any) (*config.COENodeGroup, error) {
	g, err := b.GetNodeGroup(ctx, who, cluster, ident)
	if err != nil {
		return nil, err
	}
	c, err := b.clusterOp(ctx, who, cluster, map[string]any{"OP_ID": "OP_COE_NODEGROUP_MODIFY", "nodegroup": g.UUID, "changes": changes})
	if err != nil {
		return nil, err
	}
	return b.GetNodeGroup(ctx, who, c, g.UUID)
}

func (b *luxiBackend) DeleteNodeGroup(ctx context.Context, who Caller, cluster, ident string) error {
	g, err := b.GetNodeGroup(ctx, who, cluster, ident)
	if err != nil {
		return err
	}
	_, err = b.clusterOp(ctx, who, cluster, map[string]any{"OP_ID": "OP_COE_NODEGROUP_REMOVE", "nodegroup": g.UUID})
	return err
}

func (b *luxiBackend) GetCA(ctx context.Context, who Caller, cluster string) (Certificate, error) {
	c, err := b.GetCluster(ctx, who, cluster)
	if err != nil {
		return Certificate{}, err
	}
	var out coewire.Certificate
	if err := b.call(ctx, coewire.MethodCA, []any{c.UUID}, &out); err != nil {
		return Certificate{}, err
	}
	return Certificate{ClusterUUID: out.ClusterUUID, PEM: out.PEM}, nil
}

func (b *luxiBackend) SignCSR(ctx context.Context, who Caller, cluster, csr string) (Certificate, error) {
	c, err := b.GetCluster(ctx, who, cluster)
	if err != nil {
		return Certificate{}, err
	}
	var out coewire.Certificate
	if err := b.call(ctx, coewire.MethodSign, []any{coewire.SignArgs{Cluster: c.UUID, CSR: csr}}, &out); err != nil {
		return Certificate{}, err
	}
	return Certificate{ClusterUUID: out.ClusterUUID, PEM: out.PEM}, nil
}

func (b *luxiBackend) RotateCA(ctx context.Context, who Caller, cluster string) (string, error) {
	return b.clusterOp(ctx, who, cluster, map[string]any{"OP_ID": "OP_COE_CA_ROTATE"})
}

func (b *luxiBackend) quotas(ctx context.Context) ([]*config.COEQuota, error) {
	var out []*config.COEQuota
	err := b.call(ctx, coewire.MethodQuotas, nil, &out)
	return out, err
}

func (b *luxiBackend) ListQuotas(ctx context.Context, who Caller, all bool) ([]*config.COEQuota, error) {
	if err := CanListQuotas(who, all); err != nil {
		return nil, err
	}
	qs, err := b.quotas(ctx)
	if err != nil {
		return nil, err
	}
	out := qs[:0]
	for _, q := range qs {
		if all || q.ProjectID == who.Project {
			out = append(out, q)
		}
	}
	return out, nil
}

func (b *luxiBackend) findQuota(ctx context.Context, project, resource string) (*config.COEQuota, error) {
	qs, err := b.quotas(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		if q.ProjectID == project && q.Resource == resource {
			return q, nil
		}
	}
	return nil, nil
}

func (b *luxiBackend) GetQuota(ctx context.Context, who Caller, project, resource string) (*config.COEQuota, error) {
	if err := CanSeeQuota(who, project); err != nil {
		return nil, err
	}
	q, err := b.findQuota(ctx, project, resource)
	if err != nil {
		return nil, err
	}
	return QuotaOrDefault(q, project), nil
}

func (b *luxiBackend) SetQuota(ctx context.Context, who Caller, project, resource string, limit int, create bool) (*config.COEQuota, error) {
	if err := CanSetQuota(who); err != nil {
		return nil, err
	}
	if err := b.submit(ctx, map[string]any{"OP_ID": "OP_COE_QUOTA_SET", "project_id": project, "resource": resource,
		"hard_limit": limit, "create": create}); err != nil {
		return nil, err
	}
	q, err := b.findQuota(ctx, project, resource)
	if err == nil && q == nil {
		err = ErrQuotaNotFound(project, resource)
	}
	return q, err
}

func (b *luxiBackend) DeleteQuota(ctx context.Context, who Caller, project, resource string) error {
	if err := CanSetQuota(who); err != nil {
		return err
	}
	return b.submit(ctx, map[string]any{"OP_ID": "OP_COE_QUOTA_REMOVE", "project_id": project, "resource": resource})
}

func (b *luxiBackend) federations(ctx context.Context, names []string) ([]*config.COEFederation, error) {
	var out []*config.COEFederation
	err := b.call(ctx, coewire.MethodFederations, []any{names}, &out)
	return out, err
}

func (b *luxiBackend) ListFederations(ctx context.Context, who Caller) ([]*config.COEFederation, error) {
	all, err := b.federations(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, f := range all {
		if Owns(who, f.ProjectID) {
			out = append(out, f)
		}
	}
	return out, nil
}

func (b *luxiBackend) GetFederation(ctx context.Context, who Caller, ident string) (*config.COEFederation, error) {
	fs, err := b.federations(ctx, []string{ident})
	if ecode.ClassOf(err) == ecode.NoEnt || (err == nil && (len(fs) != 1 || !Owns(who, fs[0].ProjectID))) {
		return nil, ErrFederationNotFound(ident)
	}
	if err != nil {
		return nil, err
	}
	return fs[0], nil
}

func (b *luxiBackend) CreateFederation(ctx context.Context, who Caller, f FederationCreate) error {
	return b.submit(ctx, map[string]any{"OP_ID": "OP_COE_FEDERATION_CREATE", "name": f.Name, "uuid": f.UUID,
		"hostcluster_id": f.Host, "member_ids": listOf(f.Members), "properties": f.Properties, "project_id": who.Project})
}

func (b *luxiBackend) UpdateFederation(ctx context.Context, who Caller, ident string, changes map[string]any) (string, error) {
	f, err := b.GetFederation(ctx, who, ident)
	if err != nil {
		return "", err
	}
	err = b.submit(ctx, map[string]any{"OP_ID": "OP_COE_FEDERATION_MODIFY", "federation": f.UUID, "changes": changes,
		"project_id": actingProject(who, f.ProjectID)})
	return f.UUID, err
}

func (b *luxiBackend) DeleteFederation(ctx context.Context, who Caller, ident string) error {
	f, err := b.GetFederation(ctx, who, ident)
	if err != nil {
		return err
	}
	return b.submit(ctx, map[string]any{"OP_ID": "OP_COE_FEDERATION_REMOVE", "federation": f.UUID,
		"project_id": actingProject(who, f.ProjectID)})
}

func (b *luxiBackend) Stats(ctx context.Context, who Caller, project string) (Stats, error) {
	if err := CanSeeStats(who, project); err != nil {
		return Stats{}, err
	}
	cs, err := b.clusters(ctx, nil)
	if err != nil {
		return Stats{}, err
	}
	return CountStats(cs, project), nil
}

// Services reports corrald as Magnum's conductor and this corral-rapi as
// its API, numbered in that order.
func (b *luxiBackend) Services(ctx context.Context, who Caller) ([]Service, error) {
	var ws []coewire.Service
	if err := b.call(ctx, coewire.MethodServices, nil, &ws); err != nil {
		return nil, err
	}
	var out []Service
	for _, s := range ws {
		st := "down"
		if s.Up {
			st = "up"
		}
		svc := Service{ID: len(out) + 1, Host: s.Host, Binary: "magnum-conductor", State: st, ReportCount: 1}
		if s.Since > 0 {
			svc.CreatedAt = isoTime(s.Since)
		}
		out = append(out, svc)
	}
	host, _ := os.Hostname()
	out = append(out, Service{ID: len(out) + 1, Host: host, Binary: "magnum-api", State: "up", ReportCount: 1})
	return out, nil
}

func listOf(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
