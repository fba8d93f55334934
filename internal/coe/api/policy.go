package api

import "github.com/corral/corral/internal/config"

// Magnum's policy, as the backends apply it: an object belongs to a
// project; a caller sees and changes its own project's objects, an
// administrator every project's; public templates are seen by everyone but
// changed by their owner (or an administrator) only; quotas are set by
// administrators only.

// Owns reports whether who may see and change an object of project.
func Owns(who Caller, project string) bool { return who.Admin || project == who.Project }

// SeesTemplate reports whether who may see (and use) a template.
func SeesTemplate(who Caller, t *config.COETemplate) bool {
	return t.Public || Owns(who, t.ProjectID)
}

// CanListQuotas checks a quota list: every project's only for an
// administrator.
func CanListQuotas(who Caller, all bool) error {
	if all && !who.Admin {
		return ErrForbidden("quota:get_all")
	}
	return nil
}

// CanSeeQuota checks a quota show: an administrator, or the project's
// own caller.
func CanSeeQuota(who Caller, project string) error {
	if !Owns(who, project) {
		return ErrForbidden("quota:get")
	}
	return nil
}

// CanSetQuota checks a quota create, update or delete.
func CanSetQuota(who Caller) error {
	if !who.Admin {
		return ErrForbidden("quota:create")
	}
	return nil
}

// CanSeeStats checks a stats request for project ("" every project's).
func CanSeeStats(who Caller, project string) error {
	if !who.Admin && (project == "" || project != who.Project) {
		return ErrForbidden("stats:get_all")
	}
	return nil
}

// CountStats counts clusters (those of project; all when "") and their
// nodes: every node group's node count.
func CountStats(cs []*Cluster, project string) Stats {
	var st Stats
	for _, c := range cs {
		if project != "" && c.ProjectID != project {
			continue
		}
		st.Clusters++
		for _, g := range c.NodeGroups {
			st.Nodes += g.NodeCount
		}
	}
	return st
}

// QuotaOrDefault is q, or the default quota of project when q is nil.
func QuotaOrDefault(q *config.COEQuota, project string) *config.COEQuota {
	if q != nil {
		return q
	}
	return &config.COEQuota{ProjectID: project, Resource: QuotaResource, HardLimit: DefaultClusterQuota}
}
