package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
)

var nodeGroupCreateKinds = map[string]fieldKind{
	"name": kindString, "uuid": kindString, "role": kindString, "node_count": kindInt,
	"min_node_count": kindInt, "max_node_count": kindInt, "flavor_id": kindString,
	"image_id": kindString, "docker_volume_size": kindInt, "labels": kindLabels, "merge_labels": kindBool,
}

// nodeGroupPatchKinds are what a node group PATCH may change (Magnum's).
var nodeGroupPatchKinds = map[string]fieldKind{"node_count": kindInt, "min_node_count": kindInt, "max_node_count": kindInt}

func decodeNodeGroupCreate(body []byte, v Version) (NodeGroupCreate, error) {
	f, err := decodeFields(body, nodeGroupCreateKinds)
	if err != nil {
		return NodeGroupCreate{}, err
	}
	g := NodeGroupCreate{Params: map[string]any{}}
	if g.Name, _ = f["name"].(string); g.Name == "" {
		return NodeGroupCreate{}, badRequest("Invalid input for field/attribute name. Value: None. Mandatory field missing.")
	}
	if g.UUID, _ = f["uuid"].(string); g.UUID == "" {
		g.UUID = config.NewUUID()
	} else if !isUUID(g.UUID) {
		return NodeGroupCreate{}, badRequest("Invalid input for field/attribute uuid. Value: '%s'. Invalid UUID value", g.UUID)
	}
	if err := checkCounts(f, v); err != nil {
		return NodeGroupCreate{}, err
	}
	for k, val := range f {
		if k != "name" && k != "uuid" {
			g.Params[k] = val
		}
	}
	return g, nil
}

// checkCounts checks a group's counts: node_count at least the version's
// minimum, min_node_count not negative, min <= node_count <= max.
func checkCounts(f map[string]any, v Version) error {
	n, hasN := f["node_count"].(int)
	if hasN {
		if err := checkNodeCount("node_count", n, v); err != nil {
			return err
		}
	}
	lo, hasLo := f["min_node_count"].(int)
	if hasLo && lo < 0 {
		return badRequest("Invalid input for field/attribute min_node_count. Value: %d. Value should be greater or equal to 0", lo)
	}
	hi, hasHi := f["max_node_count"].(int)
	if hasLo && hasHi && hi < lo {
		return badRequest("min_node_count (%d) should be less or equal to max_node_count (%d).", lo, hi)
	}
	if hasN && hasLo && n < lo {
		return badRequest("node_count (%d) should be greater or equal to min_node_count (%d).", n, lo)
	}
	if hasN && hasHi && n > hi {
		return badRequest("node_count (%d) should be less or equal to max_node_count (%d).", n, hi)
	}
	return nil
}

func (h *Handler) listNodeGroups(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeNodeGroups(w, r, c, false)
}

func (h *Handler) listNodeGroupsDetail(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeNodeGroups(w, r, c, true)
}

func (h *Handler) writeNodeGroups(w http.ResponseWriter, r *http.Request, c *call, detail bool) error {
	if err := gate(c, v9NodeGroups, "get_all"); err != nil {
		return err
	}
	gs, err := h.be.ListNodeGroups(r.Context(), c.who, r.PathValue("ident"), r.URL.Query().Get("role"))
	if err != nil {
		return err
	}
	slices.SortFunc(gs, func(a, b *config.COENodeGroup) int { return strings.Compare(a.UUID, b.UUID) })
	out := make([]map[string]any, 0, len(gs))
	for _, g := range gs {
		out = append(out, nodeGroupDoc(g, c.base, detail))
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodegroups": out})
	return nil
}

func (h *Handler) showNodeGroup(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v9NodeGroups, "get_one"); err != nil {
		return err
	}
	g, err := h.be.GetNodeGroup(r.Context(), c.who, r.PathValue("ident"), r.PathValue("ng"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, nodeGroupDoc(g, c.base, true))
	return nil
}

func (h *Handler) createNodeGroup(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v9NodeGroups, "post"); err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	ng, err := decodeNodeGroupCreate(body, c.v)
	if err != nil {
		return err
	}
	g, err := h.be.CreateNodeGroup(r.Context(), c.who, r.PathValue("ident"), ng)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, nodeGroupDoc(g, c.base, true))
	return nil
}

func (h *Handler) patchNodeGroup(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v9NodeGroups, "patch"); err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	cluster := r.PathValue("ident")
	g, err := h.be.GetNodeGroup(r.Context(), c.who, cluster, r.PathValue("ng"))
	if err != nil {
		return err
	}
	changes, err := patchChanges(body, nodeGroupDoc(g, c.base, true), nodeGroupPatchKinds)
	if err != nil {
		return err
	}
	// The counts are checked as they will be: the changes over the
	// group's current values.
	merged := map[string]any{"node_count": g.NodeCount, "min_node_count": g.MinNodeCount}
	if g.MaxNodeCount != nil {
		merged["max_node_count"] = *g.MaxNodeCount
	}
	for k, v := range changes {
		if v == nil {
			delete(merged, k)
			continue
		}
		merged[k] = v
	}
	if v, ok := changes["node_count"]; ok && v == nil {
		return badRequest("Invalid input for field/attribute node_count. A number is required.")
	}
	if v, ok := changes["min_node_count"]; ok && v == nil {
		changes["min_node_count"] = 0
	}
	if err := checkCounts(merged, c.v); err != nil {
		return err
	}
	g, err = h.be.UpdateNodeGroup(r.Context(), c.who, cluster, g.UUID, changes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, nodeGroupDoc(g, c.base, true))
	return nil
}

func (h *Handler) deleteNodeGroup(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := gate(c, v9NodeGroups, "delete"); err != nil {
		return err
	}
	if err := h.be.DeleteNodeGroup(r.Context(), c.who, r.PathValue("ident"), r.PathValue("ng")); err != nil {
		return err
	}
	noContent(w)
	return nil
}
