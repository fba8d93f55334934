package confdb

import (
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// coeCollections are the objects of Kubernetes clusters as a service.
type coeCollections struct {
	templates   *collection[*config.COETemplate]
	clusters    *collection[*config.COECluster]
	nodeGroups  *collection[*config.COENodeGroup]
	certs       *collection[*config.COECertificate]
	quotas      *collection[*config.COEQuota]
	federations *collection[*config.COEFederation]
	trusts      *collection[*config.COETrust]
	podSubnets  *uniqueIndex[*config.COECluster]
}

func newCOECollections() coeCollections {
	podSubnets := newUniqueIndex(pfxCOEPodSubnet, podSubnetCount, podSubnetKey)
	return coeCollections{
		podSubnets:  podSubnets,
		templates:   newCollection(pfxCOETemplate, pfxNameCOETemplate, keepName, func() *config.COETemplate { return new(config.COETemplate) }),
		clusters:    newCollection(pfxCOECluster, pfxNameCOECluster, keepName, func() *config.COECluster { return new(config.COECluster) }, podSubnets),
		nodeGroups:  newCollection(pfxCOENodeGroup, pfxNameCOENodeGrp, keepName, func() *config.COENodeGroup { return new(config.COENodeGroup) }),
		certs:       newCollection(pfxCOECert, pfxNameCOECert, keepName, func() *config.COECertificate { return new(config.COECertificate) }),
		quotas:      newCollection(pfxCOEQuota, pfxNameCOEQuota, keepName, func() *config.COEQuota { return new(config.COEQuota) }),
		federations: newCollection(pfxCOEFederation, pfxNameCOEFed, keepName, func() *config.COEFederation { return new(config.COEFederation) }),
		trusts:      newCollection(pfxCOETrust, pfxNameCOETrust, keepName, func() *config.COETrust { return new(config.COETrust) }),
	}
}

func (c coeCollections) register(kinds map[string]loader) {
	kinds[kindOf(pfxCOETemplate)] = c.templates
	kinds[kindOf(pfxCOECluster)] = c.clusters
	kinds[kindOf(pfxCOENodeGroup)] = c.nodeGroups
	kinds[kindOf(pfxCOECert)] = c.certs
	kinds[kindOf(pfxCOEQuota)] = c.quotas
	kinds[kindOf(pfxCOEFederation)] = c.federations
	kinds[kindOf(pfxCOETrust)] = c.trusts
}

// getClone finds an object of c by name or uuid and copies it.
func getClone[T object[T]](db *DB, c *collection[T], nameOrUUID string) (T, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	obj, ok := c.get(nameOrUUID)
	if !ok {
		var zero T
		return zero, false
	}
	return obj.Clone(), true
}

// allClones copies every object of c, sorted by name then uuid.
func allClones[T object[T]](db *DB, c *collection[T]) []T {
	db.mu.RLock()
	out := c.sortedClones()
	db.mu.RUnlock()
	slices.SortStableFunc(out, func(a, b T) int {
		if n := strings.Compare(a.GetName(), b.GetName()); n != 0 {
			return n
		}
		return strings.Compare(a.GetUUID(), b.GetUUID())
	})
	return out
}

// COETemplate finds a cluster template by name or uuid.
func (db *DB) COETemplate(nameOrUUID string) (*config.COETemplate, bool) {
	return getClone(db, db.coe.templates, nameOrUUID)
}

// MustCOETemplate is COETemplate with the Container Infra API's error.
func (db *DB) MustCOETemplate(nameOrUUID string) (*config.COETemplate, error) {
	t, ok := db.COETemplate(nameOrUUID)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "ClusterTemplate %s could not be found.", nameOrUUID)
	}
	return t, nil
}

// COETemplates returns every cluster template.
func (db *DB) COETemplates() []*config.COETemplate { return allClones(db, db.coe.templates) }

// COECluster finds a COE cluster by name or uuid.
func (db *DB) COECluster(nameOrUUID string) (*config.COECluster, bool) {
	return getClone(db, db.coe.clusters, nameOrUUID)
}

// MustCOECluster is COECluster with the Container Infra API's error.
func (db *DB) MustCOECluster(nameOrUUID string) (*config.COECluster, error) {
	c, ok := db.COECluster(nameOrUUID)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s could not be found.", nameOrUUID)
	}
	return c, nil
}

// COEClusters returns every COE cluster.
func (db *DB) COEClusters() []*config.COECluster { return allClones(db, db.coe.clusters) }

// COEClusterStatus is a COE cluster's status (its steps' conditions), nil
// when it has none.
func (db *DB) COEClusterStatus(uuid string) *config.Status {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.coe.clusters.statusOf(uuid)
}

// COENodeGroups returns a cluster's node groups (by cluster uuid; every
// group when cluster is ""), sorted by name.
func (db *DB) COENodeGroups(cluster string) []*config.COENodeGroup {
	all := allClones(db, db.coe.nodeGroups)
	if cluster == "" {
		return all
	}
	return slices.DeleteFunc(all, func(g *config.COENodeGroup) bool { return g.Cluster != cluster })
}

// COENodeGroup finds a node group of a cluster (by uuid) by its name or
// uuid.
func (db *DB) COENodeGroup(cluster, nameOrUUID string) (*config.COENodeGroup, error) {
	if g, ok := getClone(db, db.coe.nodeGroups, nameOrUUID); ok && g.Cluster == cluster {
		return g, nil
	}
	if g, ok := getClone(db, db.coe.nodeGroups, cluster+"/"+nameOrUUID); ok {
		return g, nil
	}
	return nil, ecode.Errorf(ecode.NoEnt, "Nodegroup %s could not be found.", nameOrUUID)
}

// COENodeGroupStatus is a node group's status, nil when it has none.
func (db *DB) COENodeGroupStatus(uuid string) *config.Status {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.coe.nodeGroups.statusOf(uuid)
}

// COECertificate is a cluster's CA (by cluster uuid).
func (db *DB) COECertificate(cluster string) (*config.COECertificate, bool) {
	return getClone(db, db.coe.certs, cluster)
}

// COEQuotas returns every quota.
func (db *DB) COEQuotas() []*config.COEQuota { return allClones(db, db.coe.quotas) }

// COEQuota finds a project's quota of a resource.
func (db *DB) COEQuota(project, resource string) (*config.COEQuota, bool) {
	return getClone(db, db.coe.quotas, COEQuotaName(project, resource))
}

// COEQuotaName is a quota's unique name.
func COEQuotaName(project, resource string) string { return project + "/" + resource }

// COEFederations returns every federation.
func (db *DB) COEFederations() []*config.COEFederation { return allClones(db, db.coe.federations) }

// COEFederation finds a federation by name or uuid.
func (db *DB) COEFederation(nameOrUUID string) (*config.COEFederation, bool) {
	return getClone(db, db.coe.federations, nameOrUUID)
}

// MustCOEFederation finds a federation by name or uuid, NoEnt with
// Magnum's text when there is none.
func (db *DB) MustCOEFederation(nameOrUUID string) (*config.COEFederation, error) {
	f, ok := db.COEFederation(nameOrUUID)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Federation %s could not be found.", nameOrUUID)
	}
	return f, nil
}

// COETrust finds a trust by uuid.
func (db *DB) COETrust(uuid string) (*config.COETrust, bool) {
	return getClone(db, db.coe.trusts, uuid)
}

// CheckCOENameFree returns an ECODE_EXISTS error when another object of
// the kind ("template", "cluster" or "federation"; not self, a uuid or "")
// has the name.
func (db *DB) CheckCOENameFree(kind, name, self string) error {
	if name == "" {
		return nil
	}
	var names *nameIndex
	what := ""
	switch kind {
	case "template":
		names, what = db.coe.templates.names, "A ClusterTemplate"
	case "cluster":
		names, what = db.coe.clusters.names, "A cluster"
	case "federation":
		names, what = db.coe.federations.names, "A federation"
	default:
		return ecode.Errorf(ecode.Fault, "no name index for %q", kind)
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	if u, ok := names.exact[name]; ok && u != self {
		return ecode.Errorf(ecode.Exists, "%s with name %s already exists.", what, name)
	}
	return nil
}

// PutCOETemplate adds or updates a cluster template.
func (tx *Tx) PutCOETemplate(t *config.COETemplate) { putObject(tx, tx.db.coe.templates, t) }

// DeleteCOETemplate removes a cluster template.
func (tx *Tx) DeleteCOETemplate(t *config.COETemplate) { deleteObject(tx, tx.db.coe.templates, t) }

// PutCOECluster adds or updates a COE cluster.
func (tx *Tx) PutCOECluster(c *config.COECluster) { putObject(tx, tx.db.coe.clusters, c) }

// DeleteCOECluster removes a COE cluster (its node groups, CA and trust go
// in the same transaction).
func (tx *Tx) DeleteCOECluster(c *config.COECluster) { deleteObject(tx, tx.db.coe.clusters, c) }

// PutCOEClusterStatus sets a COE cluster's status; see putStatus.
func (tx *Tx) PutCOEClusterStatus(uuid string, st *config.Status) bool {
	return putStatus(tx, tx.db.coe.clusters, uuid, st)
}

// PutCOENodeGroup adds or updates a node group; its name is unique within
// its cluster (the index holds "<cluster uuid>/<name>", see
// config.COENodeGroup.GetName).
func (tx *Tx) PutCOENodeGroup(g *config.COENodeGroup) { putObject(tx, tx.db.coe.nodeGroups, g) }

// DeleteCOENodeGroup removes a node group.
func (tx *Tx) DeleteCOENodeGroup(g *config.COENodeGroup) {
	deleteObject(tx, tx.db.coe.nodeGroups, g)
}

// PutCOENodeGroupStatus sets a node group's status; see putStatus.
func (tx *Tx) PutCOENodeGroupStatus(uuid string, st *config.Status) bool {
	return putStatus(tx, tx.db.coe.nodeGroups, uuid, st)
}

// PutCOECertificate adds or replaces a cluster's CA; its name is the
// cluster's uuid.
func (tx *Tx) PutCOECertificate(x *config.COECertificate) {
	x.Name = x.Cluster
	putObject(tx, tx.db.coe.certs, x)
}

// DeleteCOECertificate removes a cluster's CA.
func (tx *Tx) DeleteCOECertificate(x *config.COECertificate) { deleteObject(tx, tx.db.coe.certs, x) }

// PutCOEQuota adds or updates a quota; its name is "<project>/<resource>".
func (tx *Tx) PutCOEQuota(q *config.COEQuota) {
	q.Name = COEQuotaName(q.ProjectID, q.Resource)
	putObject(tx, tx.db.coe.quotas, q)
}

// DeleteCOEQuota removes a quota.
func (tx *Tx) DeleteCOEQuota(q *config.COEQuota) { deleteObject(tx, tx.db.coe.quotas, q) }

// PutCOEFederation adds or updates a federation.
func (tx *Tx) PutCOEFederation(f *config.COEFederation) { putObject(tx, tx.db.coe.federations, f) }

// DeleteCOEFederation removes a federation.
func (tx *Tx) DeleteCOEFederation(f *config.COEFederation) {
	deleteObject(tx, tx.db.coe.federations, f)
}

// PutCOETrust adds or updates a trust (unnamed).
func (tx *Tx) PutCOETrust(t *config.COETrust) { putObject(tx, tx.db.coe.trusts, t) }

// DeleteCOETrust removes a trust.
func (tx *Tx) DeleteCOETrust(t *config.COETrust) { deleteObject(tx, tx.db.coe.trusts, t) }
