package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/config"
)

// clusterCreateKinds are the fields a cluster create may carry.
var clusterCreateKinds = map[string]fieldKind{
	"name": kindString, "uuid": kindString, "cluster_template_id": kindString,
	"create_timeout": kindInt, "discovery_url": kindString, "keypair": kindString,
	"master_count": kindInt, "node_count": kindInt, "labels": kindLabels, "flavor_id": kindString,
	"master_flavor_id": kindString, "docker_volume_size": kindInt, "fixed_network": kindString,
	"fixed_subnet": kindString, "floating_ip_enabled": kindBool, "master_lb_enabled": kindBool,
	"merge_labels": kindBool,
}

// clusterPatchKinds are what a cluster PATCH may change: Magnum lets only
// the worker count through.
var clusterPatchKinds = map[string]fieldKind{"node_count": kindInt}

// minNodes is the least node_count v allows (0 from 1.10).
func minNodes(v Version) int {
	if v.AtLeast(v10ZeroNodes) {
		return 0
	}
	return 1
}

func checkNodeCount(name string, n int, v Version) error {
	if n < minNodes(v) {
		return badRequest("Invalid input for field/attribute %s. Value: %d. Value should be greater or equal to %d", name, n, minNodes(v))
	}
	return nil
}

// decodeClusterCreate parses a cluster create body into the opcode's
// parameters.
func decodeClusterCreate(body []byte, v Version) (ClusterCreate, error) {
	fields, err := decodeFields(body, clusterCreateKinds)
	if err != nil {
		return ClusterCreate{}, err
	}
	cc := ClusterCreate{Params: map[string]any{}}
	cc.Template, _ = fields["cluster_template_id"].(string)
	if cc.Template == "" {
		return ClusterCreate{}, badRequest("Invalid input for field/attribute cluster_template_id. Value: None. Mandatory field missing.")
	}
	cc.Name, _ = fields["name"].(string)
	cc.UUID, _ = fields["uuid"].(string)
	if cc.UUID == "" {
		cc.UUID = config.NewUUID()
	} else if !isUUID(cc.UUID) {
		return ClusterCreate{}, badRequest("Invalid input for field/attribute uuid. Value: '%s'. Invalid UUID value", cc.UUID)
	}
	if cc.Name == "" {
		cc.Name = "cluster-" + cc.UUID[:8]
	}
	if n, ok := fields["node_count"].(int); ok {
		if err := checkNodeCount("node_count", n, v); err != nil {
			return ClusterCreate{}, err
		}
	}
	if n, ok := fields["master_count"].(int); ok && n < 1 {
		return ClusterCreate{}, badRequest("Invalid input for field/attribute master_count. Value: %d. Value should be greater or equal to 1", n)
	}
	if n, ok := fields["create_timeout"].(int); ok && n < 0 {
		return ClusterCreate{}, badRequest("Invalid input for field/attribute create_timeout. Value: %d. Value should be greater or equal to 0", n)
	}
	for k, val := range fields {
		switch k {
		case "name", "uuid", "cluster_template_id":
		default:
			cc.Params[k] = val
		}
	}
	return cc, nil
}

func (h *Handler) listClusters(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeClusters(w, r, c, false)
}

func (h *Handler) listClustersDetail(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeClusters(w, r, c, true)
}

func (h *Handler) writeClusters(w http.ResponseWriter, r *http.Request, c *call, detail bool) error {
	cs, err := h.be.ListClusters(r.Context(), c.who)
	if err != nil {
		return err
	}
	slices.SortFunc(cs, func(a, b *Cluster) int { return strings.Compare(a.UUID, b.UUID) })
	out := make([]map[string]any, 0, len(cs))
	for _, k := range cs {
		out = append(out, clusterDoc(k, c.base, detail))
	}
	writeJSON(w, http.StatusOK, map[string]any{"clusters": out})
	return nil
}

func (h *Handler) showCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	k, err := h.be.GetCluster(r.Context(), c.who, r.PathValue("ident"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, clusterDoc(k, c.base, true))
	return nil
}

func (h *Handler) createCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	cc, err := decodeClusterCreate(body, c.v)
	if err != nil {
		return err
	}
	if err := h.be.CreateCluster(r.Context(), c.who, cc); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"uuid": cc.UUID})
	return nil
}

func (h *Handler) patchCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	k, err := h.be.GetCluster(r.Context(), c.who, r.PathValue("ident"))
	if err != nil {
		return err
	}
	changes, err := patchChanges(body, clusterDoc(k, c.base, true), clusterPatchKinds)
	if err != nil {
		return err
	}
	n, ok := changes["node_count"].(int)
	if !ok {
		return badRequest("Invalid input for field/attribute node_count. A number is required.")
	}
	if err := checkNodeCount("node_count", n, c.v); err != nil {
		return err
	}
	// Magnum's ?rollback=True (python-magnumclient's --rollback).
	rollback := false
	if v := r.URL.Query().Get("rollback"); v != "" {
		if rollback, err = strconv.ParseBool(v); err != nil {
			return badRequest("Invalid input for query parameter rollback. Value: %s. A boolean is required.", v)
		}
	}
	uuid, err := h.be.UpdateCluster(r.Context(), c.who, k.UUID, changes, rollback)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"uuid": uuid})
	return nil
}

func (h *Handler) deleteCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := h.be.DeleteCluster(r.Context(), c.who, r.PathValue("ident")); err != nil {
		return err
	}
	noContent(w)
	return nil
}

var resizeKinds = map[string]fieldKind{"node_count": kindInt, "nodes_to_remove": kindStringList, "nodegroup": kindString}

func (h *Handler) resizeCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v7Resize, "resize"); err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	f, err := decodeFields(body, resizeKinds)
	if err != nil {
		return err
	}
	n, ok := f["node_count"].(int)
	if !ok {
		return badRequest("Invalid input for field/attribute node_count. Value: None. Mandatory field missing.")
	}
	if err := checkNodeCount("node_count", n, c.v); err != nil {
		return err
	}
	rs := Resize{NodeCount: n}
	rs.NodeGroup, _ = f["nodegroup"].(string)
	rs.NodesToRemove, _ = f["nodes_to_remove"].([]string)
	uuid, err := h.be.ResizeCluster(r.Context(), c.who, r.PathValue("ident"), rs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"uuid": uuid})
	return nil
}

var upgradeKinds = map[string]fieldKind{"cluster_template": kindString, "max_batch_size": kindInt, "nodegroup": kindString}

func (h *Handler) upgradeCluster(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v7Upgrade, "upgrade"); err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	f, err := decodeFields(body, upgradeKinds)
	if err != nil {
		return err
	}
	u := Upgrade{MaxBatchSize: 1}
	if u.Template, _ = f["cluster_template"].(string); u.Template == "" {
		return badRequest("Invalid input for field/attribute cluster_template. Value: None. Mandatory field missing.")
	}
	if n, ok := f["max_batch_size"].(int); ok {
		if n < 1 {
			return badRequest("Invalid input for field/attribute max_batch_size. Value: %d. Value should be greater or equal to 1", n)
		}
		u.MaxBatchSize = n
	}
	u.NodeGroup, _ = f["nodegroup"].(string)
	uuid, err := h.be.UpgradeCluster(r.Context(), c.who, r.PathValue("ident"), u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"uuid": uuid})
	return nil
}
