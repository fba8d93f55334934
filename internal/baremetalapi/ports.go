package baremetalapi

import (
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jsonpatch"
)

// portField is a port object's key with its version and getter.
type portField struct {
	name     string
	minMinor int
	get      func(p *config.MachinePort) any
}

var portFields = []portField{
	{"uuid", 1, func(p *config.MachinePort) any { return p.UUID }},
	{"address", 1, func(p *config.MachinePort) any { return p.Address }},
	{"node_uuid", 1, func(p *config.MachinePort) any { return str(p.Machine) }},
	{"extra", 1, func(p *config.MachinePort) any { return dict(p.Extra) }},
	{"internal_info", 18, func(p *config.MachinePort) any { return map[string]any{} }},
	{"local_link_connection", v19PortLLC, func(p *config.MachinePort) any { return dict(p.LocalLinkConnection) }},
	{"pxe_enabled", v19PortLLC, func(p *config.MachinePort) any { return p.PXEEnabled }},
	{"portgroup_uuid", v24PortgroupsLinks, func(p *config.MachinePort) any { return nil }},
	{"physical_network", v34PhysNet, func(p *config.MachinePort) any { return str(p.PhysicalNetwork) }},
	{"is_smartnic", 53, func(p *config.MachinePort) any { return false }},
	{"created_at", 1, func(p *config.MachinePort) any { return isoTime(p.CTime, false) }},
	{"updated_at", 1, func(p *config.MachinePort) any {
		if p.MTime == p.CTime {
			return nil
		}
		return isoTime(p.MTime, false)
	}},
}

var portFieldMin = func() map[string]int {
	out := map[string]int{}
	for _, f := range portFields {
		out[f.name] = f.minMinor
	}
	return out
}()

func portDoc(p *config.MachinePort, v Version, fields []string) map[string]any {
	out := map[string]any{}
	for _, f := range portFields {
		if v.AtLeast(f.minMinor) && wanted(fields, f.name) {
			out[f.name] = f.get(p)
		}
	}
	return out
}

func renderPort(p *config.MachinePort, v Version, base string, fields []string) map[string]any {
	out := portDoc(p, v, fields)
	out["links"] = links(base+"/v1/ports/"+p.UUID, base+"/ports/"+p.UUID)
	return out
}

// normalizeMAC checks a MAC address and returns it lower case with colons.
func normalizeMAC(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return "", errorf(http.StatusBadRequest, "Expected a MAC address but received %s.", s)
	}
	return strings.ToLower(hw.String()), nil
}

var portSortKeys = map[string]bool{"id": true, "uuid": true, "address": true, "created_at": true, "updated_at": true}

func portSortValue(p *config.MachinePort, key string) string {
	switch key {
	case "uuid":
		return p.UUID
	case "address":
		return p.Address
	case "updated_at":
		return isoSortable(p.MTime)
	}
	return isoSortable(p.CTime)
}

func (h *Handler) listNodePorts(w http.ResponseWriter, r *http.Request, c *call) error {
	ident := r.PathValue("ident")
	m, err := h.getMachine(r, ident)
	if err != nil {
		return err
	}
	return h.listPortsOf(w, r, c, PortFilter{Machine: m.UUID})
}

func (h *Handler) listPorts(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	var f PortFilter
	node := q.Get("node")
	if node == "" {
		node = q.Get("node_uuid")
	}
	if node != "" {
		m, err := h.getMachine(r, node)
		if err != nil {
			return err
		}
		f.Machine = m.UUID
	}
	if a := q.Get("address"); a != "" {
		mac, err := normalizeMAC(a)
		if err != nil {
			return err
		}
		f.Address = mac
	}
	return h.listPortsOf(w, r, c, f)
}

func (h *Handler) listPortsOf(w http.ResponseWriter, r *http.Request, c *call, f PortFilter) error {
	q := r.URL.Query()
	lq, err := parseListQuery(q, c, portSortKeys)
	if err != nil {
		return err
	}
	detail := lq.detail || strings.HasSuffix(r.URL.Path, "/detail")
	ps, err := h.be.ListPorts(r.Context(), f)
	if err != nil {
		return err
	}
	ps, next, err := page(ps, lq, portSortValue, func(p *config.MachinePort) string { return p.UUID })
	if err != nil {
		return err
	}
	fields := lq.fields
	if fields == nil && !detail {
		fields = []string{"uuid", "address"}
	}
	out := make([]any, len(ps))
	for i, p := range ps {
		out[i] = renderPort(p, c.v, c.base, fields)
	}
	res := map[string]any{"ports": out}
	if next != "" {
		nq := r.URL.Query()
		nq.Set("marker", next)
		res["next"] = c.base + r.URL.Path + "?" + nq.Encode()
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// getPort fetches a port with Ironic's 404 text.
func (h *Handler) getPort(r *http.Request, uuid string) (*config.MachinePort, error) {
	p, err := h.be.GetPort(r.Context(), uuid)
	return p, portErr(err, uuid)
}

func portErr(err error, uuid string) error {
	if err != nil && ecode.ClassOf(err) == ecode.NoEnt {
		return ErrPortNotFound(uuid)
	}
	return err
}

func (h *Handler) showPort(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := h.getPort(r, r.PathValue("uuid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderPort(p, c.v, c.base, nil))
	return nil
}

var portCreateFields = []string{"address", "node_uuid", "uuid", "extra", "local_link_connection", "pxe_enabled", "physical_network"}

func (h *Handler) createPort(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		return err
	}
	obj, err := decodeObject(body, portCreateFields, false)
	if err != nil {
		return err
	}
	for k := range obj {
		if !c.v.AtLeast(portFieldMin[k]) {
			return notAcceptable("Request not acceptable.")
		}
	}
	p := &config.MachinePort{PXEEnabled: true}
	var node string
	for k, dst := range map[string]any{"address": &p.Address, "node_uuid": &node, "uuid": &p.UUID, "extra": &p.Extra,
		"local_link_connection": &p.LocalLinkConnection, "pxe_enabled": &p.PXEEnabled, "physical_network": &p.PhysicalNetwork} {
		if _, err := member(obj, k, dst); err != nil {
			return err
		}
	}
	if p.Address, err = normalizeMAC(p.Address); err != nil {
		return err
	}
	if node == "" {
		return errorf(http.StatusBadRequest, "'node_uuid' is a required property")
	}
	m, err := h.getMachine(r, node)
	if err != nil {
		return err
	}
	p.Machine = m.UUID
	if p.UUID == "" {
		p.UUID = config.NewUUID()
	} else if !uuidRE.MatchString(p.UUID) {
		return errorf(http.StatusBadRequest, "Expected a UUID but received %s.", p.UUID)
	}
	created, err := h.be.CreatePort(r.Context(), p)
	if err != nil {
		return err
	}
	w.Header().Set("Location", c.base+"/v1/ports/"+created.UUID)
	writeJSON(w, http.StatusCreated, renderPort(created, c.v, c.base, nil))
	return nil
}

var portPatchable = map[string]fieldKind{"address": kindString, "node_uuid": kindString, "extra": kindDict,
	"local_link_connection": kindDict, "pxe_enabled": kindBool, "physical_network": kindString}

func (h *Handler) patchPort(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		return err
	}
	ops, err := jsonpatch.Decode(body)
	if err != nil {
		return errorf(http.StatusBadRequest, "%s", err.Error())
	}
	uuid := r.PathValue("uuid")
	p, err := h.getPort(r, uuid)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(portPatchable))
	for k := range portPatchable {
		names = append(names, k)
	}
	slices.Sort(names)
	doc := jsonpatch.Clone(portDoc(p, c.v, nil)).(map[string]any)
	fields, err := patchDoc(doc, ops, c.v, portFieldMin, portPatchable, names, func(name string, v any) error {
		return h.checkPortValue(r, name, v)
	})
	if err != nil {
		return err
	}
	if len(fields) == 0 {
		writeJSON(w, http.StatusOK, renderPort(p, c.v, c.base, nil))
		return nil
	}
	if a, ok := fields["address"].(string); ok {
		fields["address"], _ = normalizeMAC(a)
	}
	if n, ok := fields["node_uuid"].(string); ok {
		m, err := h.getMachine(r, n)
		if err != nil {
			return err
		}
		fields["node_uuid"] = m.UUID
	}
	updated, err := h.be.UpdatePort(r.Context(), uuid, PortUpdate{Serial: p.Serial, Fields: fields})
	if err != nil {
		return portErr(err, uuid)
	}
	writeJSON(w, http.StatusOK, renderPort(updated, c.v, c.base, nil))
	return nil
}

// checkPortValue refuses a port patch's bad address or unknown machine.
func (h *Handler) checkPortValue(r *http.Request, name string, v any) error {
	switch name {
	case "address":
		if v == nil {
			return errorf(http.StatusBadRequest, "A port needs an address.")
		}
		_, err := normalizeMAC(v.(string))
		return err
	case "node_uuid":
		if v == nil {
			return errorf(http.StatusBadRequest, "A port needs a node.")
		}
		_, err := h.getMachine(r, v.(string))
		return err
	}
	return nil
}

func (h *Handler) deletePort(w http.ResponseWriter, r *http.Request, c *call) error {
	uuid := r.PathValue("uuid")
	if err := h.be.DeletePort(r.Context(), uuid); err != nil {
		return portErr(err, uuid)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
