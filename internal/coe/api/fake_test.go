package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"slices"
	"sync"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// fakeBackend is an in-memory Backend for the HTTP layer's tests: the
// objects live in maps, creations complete at once, and each cluster has
// a real CA that signs CSRs, so the real client's kubeconfig is real.
type fakeBackend struct {
	mu        sync.Mutex
	templates []*config.COETemplate
	clusters  []*config.COECluster
	groups    []*config.COENodeGroup
	quotas    []*config.COEQuota
	feds      []*config.COEFederation
	cas       map[string]*fakeCA // by cluster uuid
	rotations map[string]int
	now       float64
	// calls records the mutations the API asked for (op and arguments).
	calls []string
}

type fakeCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{cas: map[string]*fakeCA{}, rotations: map[string]int{}, now: 1.7e9}
}

// The accessors below are for tests whose requests run in a server's
// goroutines.

func (b *fakeBackend) lastCall() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[len(b.calls)-1]
}

// onlyCluster is the uuid of the one cluster ("" unless exactly one).
func (b *fakeBackend) onlyCluster() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.clusters) != 1 {
		return ""
	}
	return b.clusters[0].UUID
}

func (b *fakeBackend) ca(cluster string) *fakeCA {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cas[cluster]
}

func (b *fakeBackend) rotationsOf(cluster string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rotations[cluster]
}

func (b *fakeBackend) tick() float64 { b.now++; return b.now }

func (b *fakeBackend) record(op string, args ...any) {
	raw, _ := json.Marshal(args)
	b.calls = append(b.calls, op+" "+string(raw))
}

// resolve finds by uuid, then by name among what the caller sees; a name
// two objects share is ambiguous.
func resolve[T interface{ GetUUID() string }](all []T, ident, kind string, name func(T) string, sees func(T) bool,
	notFound func(string) error) (T, error) {
	var zero T
	var byName []T
	for _, o := range all {
		if !sees(o) {
			continue
		}
		if o.GetUUID() == ident {
			return o, nil
		}
		if name(o) == ident {
			byName = append(byName, o)
		}
	}
	switch len(byName) {
	case 0:
		return zero, notFound(ident)
	case 1:
		return byName[0], nil
	}
	return zero, ErrAmbiguousName(kind, ident)
}

func (b *fakeBackend) template(who Caller, ident string) (*config.COETemplate, error) {
	return resolve(b.templates, ident, "cluster templates", func(t *config.COETemplate) string { return t.Name },
		func(t *config.COETemplate) bool { return SeesTemplate(who, t) }, ErrTemplateNotFound)
}

func (b *fakeBackend) cluster(who Caller, ident string) (*config.COECluster, error) {
	return resolve(b.clusters, ident, "clusters", func(c *config.COECluster) string { return c.Name },
		func(c *config.COECluster) bool { return Owns(who, c.ProjectID) }, ErrClusterNotFound)
}

func (b *fakeBackend) group(cluster, ident string) (*config.COENodeGroup, error) {
	return resolve(b.groups, ident, "nodegroups", func(g *config.COENodeGroup) string { return g.Name },
		func(g *config.COENodeGroup) bool { return g.Cluster == cluster }, ErrNodeGroupNotFound)
}

func (b *fakeBackend) view(c *config.COECluster) *Cluster {
	out := &Cluster{COECluster: c.Clone()}
	for _, g := range b.groups {
		if g.Cluster == c.UUID {
			out.NodeGroups = append(out.NodeGroups, g.Clone())
		}
	}
	for _, t := range b.templates {
		if t.UUID == c.Template {
			out.TemplateLabels = t.Labels
		}
	}
	return out
}

func (b *fakeBackend) ListTemplates(ctx context.Context, who Caller) ([]*config.COETemplate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*config.COETemplate
	for _, t := range b.templates {
		if SeesTemplate(who, t) {
			out = append(out, t.Clone())
		}
	}
	return out, nil
}

func (b *fakeBackend) GetTemplate(ctx context.Context, who Caller, ident string) (*config.COETemplate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.template(who, ident)
	if err != nil {
		return nil, err
	}
	return t.Clone(), nil
}

// setFields sets a stored object's fields by API name through JSON.
func setFields(obj any, fields map[string]any) error {
	raw, _ := json.Marshal(obj)
	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	for k, v := range fields {
		if k == "tags" {
			continue
		}
		if v == nil {
			delete(doc, k)
			continue
		}
		doc[k] = v
	}
	raw, _ = json.Marshal(doc)
	return json.Unmarshal(raw, obj)
}

func (b *fakeBackend) CreateTemplate(ctx context.Context, who Caller, name, uuid string, fields map[string]any) (*config.COETemplate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("template-create", name, fields)
	t := &config.COETemplate{Meta: config.Meta{UUID: uuid, Name: name, CTime: b.tick()}, ProjectID: who.Project, UserID: who.User}
	if err := setFields(t, fields); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "bad template: %w", err)
	}
	if tags, ok := fields["tags"].(string); ok && tags != "" {
		t.Tags = []string{tags}
	}
	t.MTime = t.CTime
	b.templates = append(b.templates, t)
	return t.Clone(), nil
}

func (b *fakeBackend) UpdateTemplate(ctx context.Context, who Caller, ident string, changes map[string]any) (*config.COETemplate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("template-update", ident, changes)
	t, err := b.template(who, ident)
	if err != nil {
		return nil, err
	}
	if !Owns(who, t.ProjectID) {
		return nil, ErrForbidden("clustertemplate:update")
	}
	if err := setFields(t, changes); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "bad change: %w", err)
	}
	t.MTime = b.tick()
	return t.Clone(), nil
}

func (b *fakeBackend) DeleteTemplate(ctx context.Context, who Caller, ident string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.template(who, ident)
	if err != nil {
		return err
	}
	if !Owns(who, t.ProjectID) {
		return ErrForbidden("clustertemplate:delete")
	}
	for _, c := range b.clusters {
		if c.Template == t.UUID {
			return ErrTemplateInUse(t.UUID)
		}
	}
	b.templates = slices.DeleteFunc(b.templates, func(x *config.COETemplate) bool { return x == t })
	return nil
}

func (b *fakeBackend) ListClusters(ctx context.Context, who Caller) ([]*Cluster, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*Cluster
	for _, c := range b.clusters {
		if Owns(who, c.ProjectID) {
			out = append(out, b.view(c))
		}
	}
	return out, nil
}

func (b *fakeBackend) GetCluster(ctx context.Context, who Caller, ident string) (*Cluster, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.cluster(who, ident)
	if err != nil {
		return nil, err
	}
	return b.view(c), nil
}

func intParam(p map[string]any, k string, def int) int {
	if v, ok := p[k].(int); ok {
		return v
	}
	return def
}

func (b *fakeBackend) CreateCluster(ctx context.Context, who Caller, cc ClusterCreate) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("cluster-create", cc.Name, cc.Template, cc.Params)
	t, err := b.template(who, cc.Template)
	if err != nil {
		return ecode.Errorf(ecode.Inval, "ClusterTemplate %s could not be found.", cc.Template)
	}
	for _, c := range b.clusters {
		if c.Name == cc.Name {
			return ecode.Errorf(ecode.Exists, "A cluster with name %s already exists.", cc.Name)
		}
	}
	n := 0
	for _, c := range b.clusters {
		if c.ProjectID == who.Project {
			n++
		}
	}
	limit := DefaultClusterQuota
	for _, q := range b.quotas {
		if q.ProjectID == who.Project && q.Resource == QuotaResource {
			limit = q.HardLimit
		}
	}
	if n >= limit {
		return ErrQuotaExceeded(limit)
	}
	now := b.tick()
	c := &config.COECluster{Meta: config.Meta{UUID: cc.UUID, Name: cc.Name, CTime: now, MTime: now},
		ProjectID: who.Project, UserID: who.User, Template: t.UUID, Labels: t.Labels,
		CreateTimeout: intParam(cc.Params, "create_timeout", 60), Status: config.COECreateComplete,
		HealthStatus: config.COEHealthy, APIAddress: "https://127.0.0.1:6443", COEVersion: "v1.31.0"}
	if l, ok := cc.Params["labels"].(map[string]string); ok {
		c.Labels = l
	}
	c.Keypair, _ = cc.Params["keypair"].(string)
	c.FlavorID, _ = cc.Params["flavor_id"].(string)
	b.clusters = append(b.clusters, c)
	for _, g := range []struct {
		name, role string
		n          int
	}{{"default-master", config.COERoleMaster, intParam(cc.Params, "master_count", 1)},
		{"default-worker", config.COERoleWorker, intParam(cc.Params, "node_count", 1)}} {
		b.groups = append(b.groups, &config.COENodeGroup{Meta: config.Meta{UUID: config.NewUUID(), Name: g.name, CTime: now},
			ProjectID: who.Project, Cluster: c.UUID, Role: g.role, IsDefault: true, NodeCount: g.n,
			Status: config.COECreateComplete, ImageID: t.ImageID, FlavorID: t.FlavorID})
	}
	ca, err := newFakeCA(c.Name)
	if err != nil {
		return err
	}
	b.cas[c.UUID] = ca
	return nil
}

func (b *fakeBackend) defaultWorkers(cluster string) *config.COENodeGroup {
	for _, g := range b.groups {
		if g.Cluster == cluster && g.IsDefault && g.Role == config.COERoleWorker {
			return g
		}
	}
	return nil
}

func (b *fakeBackend) UpdateCluster(ctx context.Context, who Caller, ident string, changes map[string]any, rollback bool) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("cluster-update", ident, changes, rollback)
	c, err := b.cluster(who, ident)
	if err != nil {
		return "", err
	}
	b.defaultWorkers(c.UUID).NodeCount = changes["node_count"].(int)
	c.Status, c.MTime = config.COEUpdateComplete, b.tick()
	return c.UUID, nil
}

func (b *fakeBackend) ResizeCluster(ctx context.Context, who Caller, ident string, r Resize) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("cluster-resize", ident, r)
	c, err := b.cluster(who, ident)
	if err != nil {
		return "", err
	}
	g := b.defaultWorkers(c.UUID)
	if r.NodeGroup != "" {
		if g, err = b.group(c.UUID, r.NodeGroup); err != nil {
			return "", err
		}
	}
	if g.Role == config.COERoleMaster {
		return "", ecode.Errorf(ecode.Inval, "Resizing a nodegroup with role master is not supported.")
	}
	g.NodeCount = r.NodeCount
	c.Status, c.MTime = config.COEUpdateComplete, b.tick()
	return c.UUID, nil
}

func (b *fakeBackend) UpgradeCluster(ctx context.Context, who Caller, ident string, u Upgrade) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("cluster-upgrade", ident, u)
	c, err := b.cluster(who, ident)
	if err != nil {
		return "", err
	}
	t, err := b.template(who, u.Template)
	if err != nil {
		return "", err
	}
	c.Template, c.Status, c.MTime = t.UUID, config.COEUpdateComplete, b.tick()
	return c.UUID, nil
}

func (b *fakeBackend) DeleteCluster(ctx context.Context, who Caller, ident string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.cluster(who, ident)
	if err != nil {
		return err
	}
	b.clusters = slices.DeleteFunc(b.clusters, func(x *config.COECluster) bool { return x == c })
	b.groups = slices.DeleteFunc(b.groups, func(g *config.COENodeGroup) bool { return g.Cluster == c.UUID })
	delete(b.cas, c.UUID)
	return nil
}

func (b *fakeBackend) ListNodeGroups(ctx context.Context, who Caller, cluster, role string) ([]*config.COENodeGroup, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.cluster(who, cluster)
	if err != nil {
		return nil, err
	}
	var out []*config.COENodeGroup
	for _, g := range b.groups {
		if g.Cluster == c.UUID && (role == "" || g.Role == role) {
			out = append(out, g.Clone())
		}
	}
	return out, nil
}

func (b *fakeBackend) GetNodeGroup(ctx context.Context, who Caller, cluster, ident string) (*config.COENodeGroup, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.cluster(who, cluster)
	if err != nil {
		return nil, err
	}
	g, err := b.group(c.UUID, ident)
	if err != nil {
		return nil, err
	}
	return g.Clone(), nil
}

func (b *fakeBackend) CreateNodeGroup(ctx context.Context, who Caller, cluster string, ng NodeGroupCreate) (*config.COENodeGroup, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("nodegroup-create", cluster, ng.Name, ng.Params)
	c, err := b.cluster(who, cluster)
	if err != nil {
		return nil, err
	}
	if _, err := b.group(c.UUID, ng.Name); err == nil {
		return nil, ecode.Errorf(ecode.Exists, "A node group with name %s already exists in the cluster %s.", ng.Name, c.UUID)
	}
	now := b.tick()
	g := &config.COENodeGroup{Meta: config.Meta{UUID: ng.UUID, Name: ng.Name, CTime: now, MTime: now},
		ProjectID: c.ProjectID, Cluster: c.UUID, Role: "worker", NodeCount: 1, Status: config.COECreateInProgress}
	if err := setFields(g, ng.Params); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "bad node group: %w", err)
	}
	b.groups = append(b.groups, g)
	return g.Clone(), nil
}

func (b *fakeBackend) UpdateNodeGroup(ctx context.Context, who Caller, cluster, ident string, changes map[string]any) (*config.COENodeGroup, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("nodegroup-update", cluster, ident, changes)
	c, err := b.cluster(who, cluster)
	if err != nil {
		return nil, err
	}
	g, err := b.group(c.UUID, ident)
	if err != nil {
		return nil, err
	}
	if err := setFields(g, changes); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "bad change: %w", err)
	}
	g.Status, g.MTime = config.COEUpdateInProgress, b.tick()
	return g.Clone(), nil
}

func (b *fakeBackend) DeleteNodeGroup(ctx context.Context, who Caller, cluster, ident string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.cluster(who, cluster)
	if err != nil {
		return err
	}
	g, err := b.group(c.UUID, ident)
	if err != nil {
		return err
	}
	if g.IsDefault {
		return ecode.Errorf(ecode.Inval, "Deleting a default nodegroup is not supported.")
	}
	b.groups = slices.DeleteFunc(b.groups, func(x *config.COENodeGroup) bool { return x == g })
	return nil
}

func (b *fakeBackend) GetCA(ctx context.Context, who Caller, cluster string) (Certificate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.cluster(who, cluster)
	if err != nil {
		return Certificate{}, err
	}
	return Certificate{ClusterUUID: c.UUID, PEM: b.cas[c.UUID].pem}, nil
}

func (b *fakeBackend) SignCSR(ctx context.Context, who Caller, cluster, csr string) (Certificate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.cluster(who, cluster)
	if err != nil {
		return Certificate{}, err
	}
	out, err := b.cas[c.UUID].sign(csr)
	if err != nil {
		return Certificate{}, err
	}
	return Certificate{ClusterUUID: c.UUID, PEM: out}, nil
}

func (b *fakeBackend) RotateCA(ctx context.Context, who Caller, cluster string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.cluster(who, cluster)
	if err != nil {
		return "", err
	}
	ca, err := newFakeCA(c.Name)
	if err != nil {
		return "", err
	}
	b.cas[c.UUID] = ca
	b.rotations[c.UUID]++
	return c.UUID, nil
}

func (b *fakeBackend) ListQuotas(ctx context.Context, who Caller, all bool) ([]*config.COEQuota, error) {
	if err := CanListQuotas(who, all); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*config.COEQuota
	for _, q := range b.quotas {
		if all || q.ProjectID == who.Project {
			out = append(out, q.Clone())
		}
	}
	return out, nil
}

func (b *fakeBackend) quota(project, resource string) *config.COEQuota {
	for _, q := range b.quotas {
		if q.ProjectID == project && q.Resource == resource {
			return q
		}
	}
	return nil
}

func (b *fakeBackend) GetQuota(ctx context.Context, who Caller, project, resource string) (*config.COEQuota, error) {
	if err := CanSeeQuota(who, project); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return QuotaOrDefault(b.quota(project, resource), project).Clone(), nil
}

func (b *fakeBackend) SetQuota(ctx context.Context, who Caller, project, resource string, limit int, create bool) (*config.COEQuota, error) {
	if err := CanSetQuota(who); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.quota(project, resource)
	switch {
	case q != nil && create:
		return nil, ecode.Errorf(ecode.Exists, "Quota for project %s already exists for resource %s.", project, resource)
	case q == nil && !create:
		return nil, ErrQuotaNotFound(project, resource)
	case q == nil:
		now := b.tick()
		q = &config.COEQuota{Meta: config.Meta{UUID: config.NewUUID(), Name: project + "/" + resource, CTime: now, MTime: now},
			ProjectID: project, Resource: resource}
		b.quotas = append(b.quotas, q)
	default:
		q.MTime = b.tick()
	}
	q.HardLimit = limit
	return q.Clone(), nil
}

func (b *fakeBackend) DeleteQuota(ctx context.Context, who Caller, project, resource string) error {
	if err := CanSetQuota(who); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.quota(project, resource)
	if q == nil {
		return ErrQuotaNotFound(project, resource)
	}
	b.quotas = slices.DeleteFunc(b.quotas, func(x *config.COEQuota) bool { return x == q })
	return nil
}

func (b *fakeBackend) Stats(ctx context.Context, who Caller, project string) (Stats, error) {
	if err := CanSeeStats(who, project); err != nil {
		return Stats{}, err
	}
	cs, _ := b.ListClusters(ctx, who)
	return CountStats(cs, project), nil
}

func (b *fakeBackend) Services(ctx context.Context, who Caller) ([]Service, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return []Service{
		{ID: 1, Host: "master1", Binary: "magnum-conductor", State: "up", ReportCount: 3, CreatedAt: isoTime(b.now)},
		{ID: 2, Host: "api1", Binary: "magnum-api", State: "up", ReportCount: 1, CreatedAt: isoTime(b.now)},
	}, nil
}

func newFakeCA(name string) (*fakeCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return &fakeCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}, nil
}

func (ca *fakeCA) sign(csrPEM string) (string, error) {
	blk, _ := pem.Decode([]byte(csrPEM))
	if blk == nil {
		return "", ecode.Errorf(ecode.Inval, "The CSR is not PEM.")
	}
	csr, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil || csr.CheckSignature() != nil {
		return "", ecode.Errorf(ecode.Inval, "The CSR is invalid.")
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: csr.Subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), nil
}
