package rapi

import (
	"context"
	"net/http"
	"strings"
)

var (
	accessWrite     = []string{AccessWrite}
	accessReadWrite = []string{AccessWrite, AccessRead}
)

func get(fn handlerFunc) method    { return method{fn: fn} }
func write(fn handlerFunc) method  { return method{access: accessWrite, fn: fn} }
func rwOnly(fn handlerFunc) method { return method{access: accessReadWrite, fn: fn} }

// missing answers 501 for a resource whose feature corrald lacks, naming it.
func missing(feature string) handlerFunc {
	return func(context.Context, *request) (any, error) {
		return nil, errf(http.StatusNotImplemented, "Not implemented in Corral yet: %s", feature)
	}
}

// buildRoutes is spec 1.5's table. res is Ganeti's resource class name minus
// "R_2_", which goes into the reason trail.
func (h *Handler) buildRoutes() []route {
	r := func(path, res string, methods map[string]method) route {
		return route{segs: strings.Split(path, "/"), res: res, methods: methods}
	}
	// notYet registers every method of a path as 501 for feature; writes
	// still need the write option, so a read user learns 403 first.
	notYet := func(path, feature string, methods ...string) route {
		m := map[string]method{}
		for _, name := range methods {
			if name == http.MethodGet {
				m[name] = get(missing(feature))
			} else {
				m[name] = write(missing(feature))
			}
		}
		return r(path, "", m)
	}
	const G, P, U, D = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
	return []route{
		r("/", "", map[string]method{G: get(func(context.Context, *request) (any, error) { return nil, nil })}),
		r("/2", "", map[string]method{G: get(func(context.Context, *request) (any, error) { return nil, nil })}),
		r("/version", "", map[string]method{G: get(func(context.Context, *request) (any, error) { return 2, nil })}),
		r("/2/info", "info", map[string]method{G: get(h.info)}),
		r("/2/features", "features", map[string]method{G: get(h.features)}),
		r("/2/os", "os", map[string]method{G: get(h.osList)}),
		r("/2/tags", "tags", map[string]method{G: get(h.tagsGet("cluster")),
			U: write(h.tagsChange("cluster", "OP_TAGS_SET")), D: write(h.tagsChange("cluster", "OP_TAGS_DEL"))}),
		r("/2/redistribute-config", "redist_config", map[string]method{U: write(h.redistConfig)}),
		r("/2/modify", "cluster_modify", map[string]method{U: write(h.clusterModify)}),

		r("/2/instances", "instances", map[string]method{G: get(h.list(&instances)), P: write(h.instanceCreate)}),
		r("/2/instances-multi-alloc", "instances_multi_alloc", map[string]method{P: write(h.instancesMultiAlloc)}),
		r("/2/instances/{name}", "instances_name", map[string]method{G: get(h.item(&instances)), D: write(h.instanceAction("OP_INSTANCE_REMOVE", nil, []string{"dry-run"}, nil))}),
		r("/2/instances/{name}/info", "instances_name_info", map[string]method{G: get(h.instanceInfo)}),
		r("/2/instances/{name}/tags", "instances_name_tags", map[string]method{G: get(h.tagsGet("instance")),
			U: write(h.tagsChange("instance", "OP_TAGS_SET")), D: write(h.tagsChange("instance", "OP_TAGS_DEL"))}),
		// Ganeti ignores the startup body except for dependencies.
		r("/2/instances/{name}/startup", "instances_name_startup", map[string]method{U: write(h.instanceAction("OP_INSTANCE_STARTUP", []string{"depends"}, []string{"dry-run", "force", "no_remember"}, nil))}),
		r("/2/instances/{name}/shutdown", "instances_name_shutdown", map[string]method{U: write(h.instanceAction("OP_INSTANCE_SHUTDOWN", nil, []string{"dry-run", "no_remember"}, nil))}),
		r("/2/instances/{name}/reboot", "instances_name_reboot", map[string]method{P: write(h.instanceAction("OP_INSTANCE_REBOOT", nil, []string{"dry-run", "ignore_secondaries"}, rebootType))}),
		r("/2/instances/{name}/reinstall", "instances_name_reinstall", map[string]method{P: write(h.instanceReinstall)}),
		r("/2/instances/{name}/rename", "instances_name_rename", map[string]method{U: write(h.instanceAction("OP_INSTANCE_RENAME", nil, []string{"dry-run"}, nil))}),
		r("/2/instances/{name}/modify", "instances_name_modify", map[string]method{U: write(h.instanceModify)}),
		notYet("/2/instances/{name}/replace-disks", "disk replacement (OP_INSTANCE_REPLACE_DISKS)", P),
		r("/2/instances/{name}/activate-disks", "instances_name_activate_disks", map[string]method{U: write(h.instanceActivateDisks())}),
		r("/2/instances/{name}/deactivate-disks", "instances_name_deactivate_disks", map[string]method{U: write(h.instanceDeactivateDisks())}),
		// Ganeti passes the whole body (disks, nodes, iallocator) on.
		r("/2/instances/{name}/recreate-disks", "instances_name_recreate_disks", map[string]method{P: write(h.instanceAction("OP_INSTANCE_RECREATE_DISKS", nil, []string{"dry-run"}, nil))}),
		r("/2/instances/{name}/disk/{id}/grow", "instances_name_disk_grow", map[string]method{P: write(h.instanceGrowDisk)}),
		r("/2/instances/{name}/prepare-export", "instances_name_prepare_export", map[string]method{U: write(h.instancePrepareExport), D: write(h.instancePrepareExportCleanup)}),
		r("/2/instances/{name}/export", "instances_name_export", map[string]method{U: write(h.instanceExport),
			D: write(h.instanceAction("OP_BACKUP_REMOVE", []string{}, []string{"dry-run"}, nil))}),
		// Ganeti passes the whole body on, with the name from the path.
		r("/2/instances/{name}/migrate", "instances_name_migrate", map[string]method{U: write(h.instanceAction("OP_INSTANCE_MIGRATE", nil, []string{"dry-run"}, nil))}),
		r("/2/instances/{name}/failover", "instances_name_failover", map[string]method{U: write(h.instanceAction("OP_INSTANCE_FAILOVER", nil, []string{"dry-run"}, nil))}),
		r("/2/instances/{name}/console", "instances_name_console", map[string]method{G: rwOnly(h.instanceConsole)}),

		r("/2/nodes", "nodes", map[string]method{G: get(h.list(&nodes))}),
		r("/2/nodes/{name}", "nodes_name", map[string]method{G: get(h.item(&nodes))}),
		r("/2/nodes/{name}/role", "nodes_name_role", map[string]method{G: get(h.nodeRole),
			U: write(h.nodeRoleSet)}),
		r("/2/nodes/{name}/tags", "nodes_name_tags", map[string]method{G: get(h.tagsGet("node")),
			U: write(h.tagsChange("node", "OP_TAGS_SET")), D: write(h.tagsChange("node", "OP_TAGS_DEL"))}),
		r("/2/nodes/{name}/powercycle", "nodes_name_powercycle", map[string]method{P: write(h.nodePowercycle)}),
		r("/2/nodes/{name}/evacuate", "nodes_name_evacuate", map[string]method{P: write(h.nodeEvacuate)}),
		r("/2/nodes/{name}/migrate", "nodes_name_migrate", map[string]method{P: write(h.nodeMigrate)}),
		r("/2/nodes/{name}/modify", "nodes_name_modify", map[string]method{P: write(h.nodeModify)}),
		// Ganeti's storage query takes locks: a job, for writers only.
		r("/2/nodes/{name}/storage", "nodes_name_storage", map[string]method{G: write(h.nodeStorage)}),
		r("/2/nodes/{name}/storage/modify", "nodes_name_storage_modify", map[string]method{U: write(h.nodeStorageModify)}),
		r("/2/nodes/{name}/storage/repair", "nodes_name_storage_repair", map[string]method{U: write(h.nodeStorageRepair)}),

		r("/2/groups", "groups", map[string]method{G: get(h.list(&groups)), P: write(h.groupCreate)}),
		r("/2/groups/{name}", "groups_name", map[string]method{G: get(h.item(&groups)), D: write(h.groupAction("OP_GROUP_REMOVE", "dry-run"))}),
		r("/2/groups/{name}/modify", "groups_name_modify", map[string]method{U: write(h.groupModify)}),
		r("/2/groups/{name}/rename", "groups_name_rename", map[string]method{U: write(h.groupAction("OP_GROUP_RENAME", "dry-run"))}),
		r("/2/groups/{name}/assign-nodes", "groups_name_assign_nodes", map[string]method{U: write(h.groupAction("OP_GROUP_ASSIGN_NODES", "dry-run", "force"))}),
		r("/2/groups/{name}/tags", "groups_name_tags", map[string]method{G: get(h.tagsGet("nodegroup")),
			U: write(h.tagsChange("nodegroup", "OP_TAGS_SET")), D: write(h.tagsChange("nodegroup", "OP_TAGS_DEL"))}),
		// Ganeti 3.0 has no network rename resource.
		r("/2/networks", "networks", map[string]method{G: get(h.list(&networks)), P: write(h.networkCreate)}),
		r("/2/networks/{name}", "networks_name", map[string]method{G: get(h.item(&networks)), D: write(h.networkAction("OP_NETWORK_REMOVE", "dry-run"))}),
		r("/2/networks/{name}/connect", "networks_name_connect", map[string]method{U: write(h.networkAction("OP_NETWORK_CONNECT", "dry-run"))}),
		r("/2/networks/{name}/disconnect", "networks_name_disconnect", map[string]method{U: write(h.networkAction("OP_NETWORK_DISCONNECT", "dry-run"))}),
		r("/2/networks/{name}/modify", "networks_name_modify", map[string]method{U: write(h.networkAction("OP_NETWORK_SET_PARAMS"))}),
		r("/2/networks/{name}/tags", "networks_name_tags", map[string]method{G: get(h.tagsGet("network")),
			U: write(h.tagsChange("network", "OP_TAGS_SET")), D: write(h.tagsChange("network", "OP_TAGS_DEL"))}),
		r("/2/filters", "filters", map[string]method{G: get(h.filtersList), P: write(h.filterAdd)}),
		r("/2/filters/{name}", "filters_uuid", map[string]method{G: get(h.filterGet), U: write(h.filterPut), D: write(h.filterDelete)}),

		r("/2/jobs", "jobs", map[string]method{G: get(h.jobsList)}),
		r("/2/jobs/{id}", "jobs_id", map[string]method{G: get(h.jobGet), D: write(h.jobCancel)}),
		r("/2/jobs/{id}/wait", "jobs_id_wait", map[string]method{G: write(h.jobWait), U: write(h.jobWait)}),
		r("/2/query/{name}", "query", map[string]method{G: rwOnly(h.query), U: rwOnly(h.query)}),
		r("/2/query/{name}/fields", "query_fields", map[string]method{G: get(h.queryFields)}),
	}
}
