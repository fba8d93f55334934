package opcodes

// Kubernetes clusters as a service (Corral only; Ganeti has none), after
// OpenStack Magnum. Parameter names are the Container Infra API's field
// names, so the API passes a request's fields through unchanged. A
// template is named by "cluster_template", a COE cluster by "cluster" and a
// node group by "nodegroup" within its cluster: each a name or uuid.
// "project_id" and "user_id" are the caller's, set by the API front from
// the authenticated user, never by the request body.

// COETemplateFields are the template fields a create sets and an update may
// change, in the API's names.
var COETemplateFields = []string{
	"coe", "server_type", "cluster_distro", "image_id", "keypair_id", "external_network_id",
	"fixed_network", "fixed_subnet", "network_driver", "volume_driver", "dns_nameserver",
	"flavor_id", "master_flavor_id", "docker_volume_size", "docker_storage_driver",
	"http_proxy", "https_proxy", "no_proxy", "insecure_registry", "apiserver_port", "labels",
	"tls_disabled", "public", "hidden", "registry_enabled", "master_lb_enabled",
	"floating_ip_enabled", "tags",
}

func coeDefs() []Def {
	cluster := Param{Name: "cluster", Type: TNEString, Required: true, Doc: "COE cluster name or uuid"}
	template := Param{Name: "cluster_template", Type: TNEString, Required: true, Doc: "cluster template name or uuid"}
	nodegroup := Param{Name: "nodegroup", Type: TNEString, Required: true, Doc: "node group name or uuid within the cluster"}
	federation := Param{Name: "federation", Type: TNEString, Required: true, Doc: "federation name or uuid"}
	project := Param{Name: "project_id", Type: TString, Default: "", Doc: "the caller's project (set by the API front)"}
	user := Param{Name: "user_id", Type: TString, Default: "", Doc: "the caller (set by the API front)"}
	labels := Param{Name: "labels", Type: TAny, Default: nil, Doc: "labels (dict of strings)"}
	rollback := Param{Name: "rollback", Type: TBool, Default: false,
		Doc: "on failure, restore the previous node count (ROLLBACK_COMPLETE) instead of UPDATE_FAILED (Magnum's ?rollback=True)"}
	maybeInt := func(name, doc string) Param { return Param{Name: name, Type: TMaybeInt, Default: nil, Doc: doc} }
	maybeStr := func(name, doc string) Param { return Param{Name: name, Type: TMaybeString, Default: nil, Doc: doc} }
	return []Def{
		{ID: "OP_COE_TEMPLATE_CREATE", KeyPrm: "name", Doc: "create a cluster template", Params: []Param{
			{Name: "name", Type: TNEString, Required: true, Doc: "template name (unique)"},
			maybeStr("uuid", "uuid to give the template (default: a new one)"),
			{Name: "fields", Type: TDict, Required: true, Doc: "the template's fields by API name (see COETemplateFields)"},
			project, user,
		}},
		{ID: "OP_COE_TEMPLATE_MODIFY", KeyPrm: "cluster_template", Doc: "change a cluster template's fields", Params: []Param{template,
			{Name: "changes", Type: TDict, Required: true, Doc: "new values by field name (name included); null removes an optional field"},
			project,
		}},
		{ID: "OP_COE_TEMPLATE_REMOVE", KeyPrm: "cluster_template", Doc: "remove a cluster template no cluster uses", Params: []Param{template, project}},

		{ID: "OP_COE_CLUSTER_CREATE", KeyPrm: "name", Doc: "create a Kubernetes cluster from a template", Params: []Param{
			{Name: "name", Type: TNEString, Required: true, Doc: "cluster name (unique)"},
			maybeStr("uuid", "uuid to give the cluster (default: a new one)"),
			template,
			{Name: "master_count", Type: TNonNegInt, Default: float64(1), Doc: "masters in the default master group (at least 1)"},
			{Name: "node_count", Type: TNonNegInt, Default: float64(1), Doc: "workers in the default worker group"},
			{Name: "create_timeout", Type: TNonNegInt, Default: float64(60), Doc: "minutes before the creation fails"},
			maybeStr("keypair", "keypair name"),
			maybeStr("flavor_id", "worker flavor (default: the template's)"),
			maybeStr("master_flavor_id", "master flavor (default: the template's)"),
			maybeInt("docker_volume_size", "container volume size in GB"),
			maybeStr("discovery_url", "etcd discovery url"),
			maybeStr("fixed_network", "network"),
			maybeStr("fixed_subnet", "subnet"),
			{Name: "floating_ip_enabled", Type: TAny, Default: nil, Doc: "bool or null: the template's"},
			{Name: "master_lb_enabled", Type: TAny, Default: nil, Doc: "bool or null: the template's"},
			labels,
			{Name: "merge_labels", Type: TBool, Default: false, Doc: "merge labels with the template's instead of replacing them"},
			project, user,
		}},
		{ID: "OP_COE_CLUSTER_MODIFY", KeyPrm: "cluster", Doc: "change a cluster (node_count resizes its default worker group)", Params: []Param{cluster,
			{Name: "changes", Type: TDict, Required: true, Doc: "new values by field name"},
			rollback,
			project,
		}},
		{ID: "OP_COE_CLUSTER_RESIZE", KeyPrm: "cluster", Doc: "change a node group's node count, removing the named nodes first", Params: []Param{cluster,
			{Name: "node_count", Type: TNonNegInt, Required: true, Doc: "new node count"},
			maybeStr("nodegroup", "node group (default: the default worker group)"),
			{Name: "nodes_to_remove", Type: TStringList, Default: []any{}, Doc: "nodes to remove first when shrinking"},
			rollback,
			project,
		}},
		{ID: "OP_COE_CLUSTER_UPGRADE", KeyPrm: "cluster", Doc: "roll a cluster's node groups to another template, max_batch_size nodes at a time", Params: []Param{cluster, template,
			{Name: "max_batch_size", Type: TNonNegInt, Default: float64(1), Doc: "nodes replaced at once (at least 1)"},
			maybeStr("nodegroup", "node group (default: all)"),
			project,
		}},
		{ID: "OP_COE_CLUSTER_REMOVE", KeyPrm: "cluster", Doc: "delete a cluster: its control plane, nodes, certificates and trust", Params: []Param{cluster, project}},
		{ID: "OP_COE_CLUSTER_SET_HEALTH", KeyPrm: "cluster", Doc: "record a cluster's observed health (the health reconciler)", Params: []Param{cluster,
			{Name: "health_status", Type: TNEString, Required: true, Doc: "HEALTHY, UNHEALTHY or UNKNOWN"},
			{Name: "health_status_reason", Type: TAny, Default: nil, Doc: "dict of strings: what is unhealthy"},
		}},
		{ID: "OP_COE_CLUSTER_HEAL", KeyPrm: "cluster", Doc: "replace a cluster's unhealthy nodes (the auto-healing reconciler)", Params: []Param{cluster,
			{Name: "nodes", Type: TStringList, Required: true, Doc: "nodes to replace"},
		}},
		{ID: "OP_COE_CA_ROTATE", KeyPrm: "cluster", Doc: "replace a cluster's CA, re-sign its certificates and restart its components (disruptive)", Params: []Param{cluster, project}},

		{ID: "OP_COE_NODEGROUP_CREATE", KeyPrm: "name", Doc: "add a node group to a cluster", Params: []Param{cluster,
			{Name: "name", Type: TNEString, Required: true, Doc: "node group name (unique within the cluster)"},
			maybeStr("uuid", "uuid to give the group (default: a new one)"),
			{Name: "role", Type: TString, Default: "worker", Doc: "role"},
			{Name: "node_count", Type: TNonNegInt, Default: float64(1), Doc: "nodes"},
			{Name: "min_node_count", Type: TNonNegInt, Default: float64(0), Doc: "least nodes autoscaling may leave"},
			maybeInt("max_node_count", "most nodes autoscaling may make (null: no limit)"),
			maybeStr("flavor_id", "flavor (default: the cluster's)"),
			maybeStr("image_id", "image (default: the template's)"),
			maybeInt("docker_volume_size", "container volume size in GB"),
			labels,
			{Name: "merge_labels", Type: TBool, Default: false, Doc: "merge labels with the cluster's"},
			project,
		}},
		{ID: "OP_COE_NODEGROUP_MODIFY", KeyPrm: "nodegroup", Doc: "change a node group's node_count, min_node_count or max_node_count", Params: []Param{cluster, nodegroup,
			{Name: "changes", Type: TDict, Required: true, Doc: "new values by field name"},
			project,
			{Name: "parent_job", Type: TNonNegInt, Default: float64(0), Doc: "the cluster job this one builds the group for (set by the units, never by the API)"},
		}},
		{ID: "OP_COE_NODEGROUP_REMOVE", KeyPrm: "nodegroup", Doc: "remove a node group that is not a default group", Params: []Param{cluster, nodegroup, project}},

		{ID: "OP_COE_QUOTA_SET", KeyPrm: "project_id", Doc: "set a project's hard limit of a resource", Params: []Param{
			{Name: "project_id", Type: TNEString, Required: true, Doc: "project"},
			{Name: "resource", Type: TNEString, Required: true, Doc: "resource (Cluster)"},
			{Name: "hard_limit", Type: TNonNegInt, Required: true, Doc: "limit"},
			{Name: "create", Type: TBool, Default: false, Doc: "refuse if the quota exists (POST) rather than require it (PATCH)"},
		}},
		{ID: "OP_COE_QUOTA_REMOVE", KeyPrm: "project_id", Doc: "remove a project's quota of a resource (back to the default)", Params: []Param{
			{Name: "project_id", Type: TNEString, Required: true, Doc: "project"},
			{Name: "resource", Type: TNEString, Required: true, Doc: "resource (Cluster)"},
		}},
		{ID: "OP_COE_FEDERATION_CREATE", KeyPrm: "name", Doc: "group clusters of a project under a host cluster (Magnum's federation)", Params: []Param{
			{Name: "name", Type: TNEString, Required: true, Doc: "federation name (unique)"},
			maybeStr("uuid", "uuid to give the federation (default: a new one)"),
			{Name: "hostcluster_id", Type: TNEString, Required: true, Doc: "host cluster name or uuid"},
			{Name: "member_ids", Type: TStringList, Default: []any{}, Doc: "member clusters (names or uuids)"},
			{Name: "properties", Type: TDict, Required: true, Doc: "properties (dict of strings with dns-zone)"},
			project,
		}},
		{ID: "OP_COE_FEDERATION_MODIFY", KeyPrm: "federation", Doc: "change a federation's members (join, unjoin) or properties", Params: []Param{federation,
			{Name: "changes", Type: TDict, Required: true, Doc: "new member_ids (list) and/or properties (dict)"},
			project,
		}},
		{ID: "OP_COE_FEDERATION_REMOVE", KeyPrm: "federation", Doc: "remove a federation (its clusters stay)", Params: []Param{federation, project}},
		{ID: "OP_COE_TRUST_REVOKE", KeyPrm: "cluster", Doc: "revoke the credential a cluster's background work acts with", Params: []Param{cluster}},
	}
}
