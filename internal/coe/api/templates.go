package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
)

// templateKinds are the fields a template create may carry (the
// opcodes' COETemplateFields, name and uuid) and their types.
var templateKinds = map[string]fieldKind{
	"name": kindString, "uuid": kindString,
	"coe": kindString, "server_type": kindString, "cluster_distro": kindString, "image_id": kindString,
	"keypair_id": kindString, "external_network_id": kindString, "fixed_network": kindString,
	"fixed_subnet": kindString, "network_driver": kindString, "volume_driver": kindString,
	"dns_nameserver": kindString, "flavor_id": kindString, "master_flavor_id": kindString,
	"docker_volume_size": kindInt, "docker_storage_driver": kindString, "http_proxy": kindString,
	"https_proxy": kindString, "no_proxy": kindString, "insecure_registry": kindString,
	"apiserver_port": kindInt, "labels": kindLabels, "tls_disabled": kindBool, "public": kindBool,
	"hidden": kindBool, "registry_enabled": kindBool, "master_lb_enabled": kindBool,
	"floating_ip_enabled": kindBool, "tags": kindString,
}

// templatePatchKinds are what a template PATCH may change: every create
// field but the uuid.
var templatePatchKinds = func() map[string]fieldKind {
	m := map[string]fieldKind{}
	for k, v := range templateKinds {
		if k != "uuid" {
			m[k] = v
		}
	}
	return m
}()

// coeTypes are the orchestration engines Magnum knows; which of them a
// driver serves is the backend's decision.
var coeTypes = []string{"kubernetes", "swarm", "swarm-mode", "mesos", "dcos"}

// serverTypes are Magnum's server types.
var serverTypes = []string{"vm", "bm"}

func (h *Handler) listTemplates(w http.ResponseWriter, r *http.Request, c *call) error {
	ts, err := h.be.ListTemplates(r.Context(), c.who)
	if err != nil {
		return err
	}
	slices.SortFunc(ts, func(a, b *config.COETemplate) int { return strings.Compare(a.UUID, b.UUID) })
	out := make([]map[string]any, 0, len(ts))
	for _, t := range ts {
		out = append(out, templateDoc(t, c.base))
	}
	writeJSON(w, http.StatusOK, map[string]any{"clustertemplates": out})
	return nil
}

func (h *Handler) showTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	t, err := h.be.GetTemplate(r.Context(), c.who, r.PathValue("ident"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, templateDoc(t, c.base))
	return nil
}

// decodeTemplateCreate parses a template create body: coe and image_id
// are mandatory, as Magnum's; the name is made when missing.
func decodeTemplateCreate(body []byte) (name, uuid string, fields map[string]any, err error) {
	fields, err = decodeFields(body, templateKinds)
	if err != nil {
		return "", "", nil, err
	}
	for _, k := range []string{"coe", "image_id"} {
		if s, _ := fields[k].(string); s == "" {
			return "", "", nil, badRequest("Invalid input for field/attribute %s. Value: None. Mandatory field missing.", k)
		}
	}
	if !slices.Contains(coeTypes, fields["coe"].(string)) {
		return "", "", nil, badRequest("Invalid input for field/attribute coe. Value: '%s'. Value should be one of: %s", fields["coe"], strings.Join(coeTypes, ", "))
	}
	if st, ok := fields["server_type"].(string); ok && !slices.Contains(serverTypes, st) {
		return "", "", nil, badRequest("Invalid input for field/attribute server_type. Value: '%s'. Value should be one of: %s", st, strings.Join(serverTypes, ", "))
	}
	if _, ok := fields["server_type"]; !ok {
		fields["server_type"] = "vm"
	}
	name, _ = fields["name"].(string)
	uuid, _ = fields["uuid"].(string)
	delete(fields, "name")
	delete(fields, "uuid")
	if uuid == "" {
		uuid = config.NewUUID()
	} else if !isUUID(uuid) {
		return "", "", nil, badRequest("Invalid input for field/attribute uuid. Value: '%s'. Invalid UUID value", uuid)
	}
	if name == "" {
		name = "clustertemplate-" + uuid[:8]
	}
	return name, uuid, fields, nil
}

func (h *Handler) createTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	name, uuid, fields, err := decodeTemplateCreate(body)
	if err != nil {
		return err
	}
	t, err := h.be.CreateTemplate(r.Context(), c.who, name, uuid, fields)
	if err != nil {
		return err
	}
	w.Header().Set("Location", c.base+"/v1/clustertemplates/"+t.UUID)
	writeJSON(w, http.StatusCreated, templateDoc(t, c.base))
	return nil
}

func (h *Handler) patchTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	t, err := h.be.GetTemplate(r.Context(), c.who, r.PathValue("ident"))
	if err != nil {
		return err
	}
	changes, err := patchChanges(body, templateDoc(t, c.base), templatePatchKinds)
	if err != nil {
		return err
	}
	if v, ok := changes["coe"]; ok && (v == nil || !slices.Contains(coeTypes, v.(string))) {
		return badRequest("Invalid input for field/attribute coe. Value should be one of: %s", strings.Join(coeTypes, ", "))
	}
	if v, ok := changes["server_type"]; ok && (v == nil || !slices.Contains(serverTypes, v.(string))) {
		return badRequest("Invalid input for field/attribute server_type. Value should be one of: %s", strings.Join(serverTypes, ", "))
	}
	if v, ok := changes["name"]; ok && (v == nil || v == "") {
		return badRequest("Invalid input for field/attribute name. A name is required.")
	}
	t, err = h.be.UpdateTemplate(r.Context(), c.who, t.UUID, changes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, templateDoc(t, c.base))
	return nil
}

func (h *Handler) deleteTemplate(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := h.be.DeleteTemplate(r.Context(), c.who, r.PathValue("ident")); err != nil {
		return err
	}
	noContent(w)
	return nil
}
