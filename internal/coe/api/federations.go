package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/jsonpatch"
)

// Federations (Magnum's /v1/federations): a project's clusters grouped
// under a host cluster. Magnum serves them at every version; creates,
// updates and deletes answer 202 {"uuid"} (204 for a delete) once the job
// is under way. Joining and leaving are JSON patches of member_ids: "add"
// or "remove" with one cluster as the value, as Magnum's client sends
// them, or a whole list.

// federationCreateKinds are the members of a federation create.
var federationCreateKinds = map[string]fieldKind{
	"uuid": kindString, "name": kindString, "hostcluster_id": kindString, "member_ids": kindStringList,
	"properties": kindLabels,
	// Magnum's body type also has these; a create ignores them.
	"status": kindString, "status_reason": kindString, "project_id": kindString,
}

// federationPatchKinds are what a federation PATCH may change.
var federationPatchKinds = map[string]fieldKind{"member_ids": kindStringList, "properties": kindLabels}

// federationNameRE is Magnum's federation name type.
var federationNameRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_.-]*$`)

// federationListFields are what a list (not detail) shows.
var federationListFields = []string{"uuid", "name", "hostcluster_id", "member_ids", "status", "properties"}

// FederationCreate is a federation create request, in the opcode's
// parameters (OP_COE_FEDERATION_CREATE).
type FederationCreate struct {
	UUID       string
	Name       string
	Host       string // name or uuid
	Members    []string
	Properties map[string]string
}

func federationDoc(f *config.COEFederation, base string, detail bool) map[string]any {
	doc := wsmeDoc(f, &f.Meta)
	if doc["member_ids"] == nil {
		doc["member_ids"] = []string{}
	}
	if doc["properties"] == nil {
		doc["properties"] = map[string]string{}
	}
	if !detail {
		keep(doc, federationListFields...)
	}
	doc["links"] = links(base, "federations", f.UUID)
	return doc
}

func (h *Handler) listFederations(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeFederations(w, r, c, false)
}

func (h *Handler) listFederationsDetail(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeFederations(w, r, c, true)
}

func (h *Handler) writeFederations(w http.ResponseWriter, r *http.Request, c *call, detail bool) error {
	fs, err := h.be.ListFederations(r.Context(), c.who)
	if err != nil {
		return err
	}
	slices.SortFunc(fs, func(a, b *config.COEFederation) int { return strings.Compare(a.UUID, b.UUID) })
	out := make([]map[string]any, 0, len(fs))
	for _, f := range fs {
		out = append(out, federationDoc(f, c.base, detail))
	}
	writeJSON(w, http.StatusOK, map[string]any{"federations": out})
	return nil
}

func (h *Handler) showFederation(w http.ResponseWriter, r *http.Request, c *call) error {
	f, err := h.be.GetFederation(r.Context(), c.who, r.PathValue("ident"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, federationDoc(f, c.base, true))
	return nil
}

// decodeFederationCreate parses a create body as Magnum's API checks it:
// a host cluster and a dns-zone property are required, the name follows
// Magnum's pattern and is made when missing.
func decodeFederationCreate(body []byte) (FederationCreate, error) {
	fields, err := decodeFields(body, federationCreateKinds)
	if err != nil {
		return FederationCreate{}, err
	}
	fc := FederationCreate{}
	fc.Name, _ = fields["name"].(string)
	fc.UUID, _ = fields["uuid"].(string)
	fc.Host, _ = fields["hostcluster_id"].(string)
	fc.Members, _ = fields["member_ids"].([]string)
	fc.Properties, _ = fields["properties"].(map[string]string)
	if fc.UUID == "" {
		fc.UUID = config.NewUUID()
	} else if !isUUID(fc.UUID) {
		return fc, badRequest("Invalid input for field/attribute uuid. Value: '%s'. Invalid UUID value", fc.UUID)
	}
	if fc.Name == "" {
		fc.Name = "federation-" + fc.UUID[:8]
	} else if len(fc.Name) > 242 || !federationNameRE.MatchString(fc.Name) {
		return fc, badRequest("Invalid input for field/attribute name. Value: '%s'. Value should match the pattern ^[a-zA-Z][a-zA-Z0-9_.-]*$", fc.Name)
	}
	if fc.Host == "" {
		return fc, badRequest("No hostcluster specified. Please specify a hostcluster_id.")
	}
	if fc.Properties == nil {
		return fc, badRequest("Please specify a `properties` dict for the federation.")
	}
	if fc.Properties["dns-zone"] == "" {
		return fc, badRequest("No DNS zone specified. Please specify a `dns-zone`.")
	}
	if fc.Members == nil {
		fc.Members = []string{}
	}
	return fc, nil
}

func (h *Handler) createFederation(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	fc, err := decodeFederationCreate(body)
	if err != nil {
		return err
	}
	if _, err := h.be.GetCluster(r.Context(), c.who, fc.Host); err != nil {
		return err
	}
	if err := h.be.CreateFederation(r.Context(), c.who, fc); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"uuid": fc.UUID})
	return nil
}

// memberPatch turns Magnum's join ("add" of one cluster to /member_ids)
// and unjoin ("remove" naming one) into a "replace" of the whole list, as
// Magnum's API does; other patches are left as they are.
func (h *Handler) memberPatch(r *http.Request, c *call, f *config.COEFederation, body []byte) ([]byte, error) {
	ops, err := jsonpatch.Decode(body)
	if err != nil {
		return nil, badRequest("Invalid JSON patch: %s", err.Error())
	}
	for _, op := range ops {
		for _, p := range []string{op.Path, op.From} {
			if p == "" {
				continue
			}
			if _, ok := federationPatchKinds[jsonpatch.Field(p)]; !ok {
				return nil, badRequest("cannot change federation property(ies) %s.", jsonpatch.Field(p))
			}
		}
	}
	first := ops[0]
	var ident string
	if first.Path != "/member_ids" || (first.Op != "add" && first.Op != "remove") || json.Unmarshal(first.Value, &ident) != nil {
		return body, nil
	}
	members := slices.Clone(f.Members)
	if first.Op == "add" {
		k, err := h.be.GetCluster(r.Context(), c.who, ident)
		if err != nil {
			return nil, err
		}
		if slices.Contains(members, k.UUID) {
			return nil, ErrMemberExists(k.UUID, f.Name)
		}
		members = append(members, k.UUID)
	} else {
		id := ident
		if !slices.Contains(members, id) {
			if k, err := h.be.GetCluster(r.Context(), c.who, ident); err == nil {
				id = k.UUID
			}
		}
		i := slices.Index(members, id)
		if i < 0 {
			return nil, errorf(http.StatusNotFound, "Cluster %s is not a member of the federation %s.", ident, f.Name)
		}
		members = slices.Delete(members, i, i+1)
	}
	raw, _ := json.Marshal(members)
	ops[0] = jsonpatch.Op{Op: "replace", Path: "/member_ids", Value: raw}
	return json.Marshal(ops)
}

func (h *Handler) patchFederation(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	f, err := h.be.GetFederation(r.Context(), c.who, r.PathValue("ident"))
	if err != nil {
		return err
	}
	if body, err = h.memberPatch(r, c, f, body); err != nil {
		return err
	}
	changes, err := patchChanges(body, federationDoc(f, c.base, true), federationPatchKinds)
	if err != nil {
		return err
	}
	if v, ok := changes["properties"]; ok {
		if p, _ := v.(map[string]string); p["dns-zone"] == "" {
			return badRequest("No DNS zone specified. Please specify a `dns-zone`.")
		}
	}
	if v, ok := changes["member_ids"]; ok && v == nil {
		changes["member_ids"] = []string{}
	}
	uuid, err := h.be.UpdateFederation(r.Context(), c.who, f.UUID, changes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"uuid": uuid})
	return nil
}

func (h *Handler) deleteFederation(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := h.be.DeleteFederation(r.Context(), c.who, r.PathValue("ident")); err != nil {
		return err
	}
	noContent(w)
	return nil
}
