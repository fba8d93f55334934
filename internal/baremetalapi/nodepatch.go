package baremetalapi

import (
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/jsonpatch"
)

// fieldKind is the JSON type a patchable field takes.
type fieldKind int

const (
	kindString fieldKind = iota
	kindDict
	kindBool
)

// nodePatchable are the node fields a PATCH may change (Ironic's list,
// less what Corral keeps no field for), with their type; everything else
// (uuid, provision_state, power_state, ...) changes only through actions.
var nodePatchable = map[string]fieldKind{
	"automated_clean": kindBool, "conductor_group": kindString, "description": kindString, "driver": kindString,
	"driver_info": kindDict, "extra": kindDict, "instance_info": kindDict, "instance_uuid": kindString,
	"lessee": kindString, "maintenance": kindBool, "name": kindString, "owner": kindString, "properties": kindDict,
	"resource_class": kindString,
	"bios_interface": kindString, "boot_interface": kindString, "console_interface": kindString,
	"deploy_interface": kindString, "inspect_interface": kindString, "management_interface": kindString,
	"network_interface": kindString, "power_interface": kindString, "raid_interface": kindString,
	"rescue_interface": kindString, "storage_interface": kindString, "vendor_interface": kindString,
}

func (h *Handler) patchNode(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		return err
	}
	ops, err := jsonpatch.Decode(body)
	if err != nil {
		return errorf(http.StatusBadRequest, "%s", err.Error())
	}
	ident := r.PathValue("ident")
	m, err := h.getMachine(r, ident)
	if err != nil {
		return err
	}
	fields, err := patchMachine(m, c.v, ops)
	if err != nil {
		return err
	}
	if len(fields) == 0 { // a patch that changes nothing (a passing test)
		writeJSON(w, http.StatusOK, renderNode(m, c.v, c.base, nil))
		return nil
	}
	updated, err := h.be.UpdateMachine(r.Context(), m.UUID, MachineUpdate{Serial: m.Serial, Fields: fields})
	if err != nil {
		return nodeErr(err, ident)
	}
	writeJSON(w, http.StatusOK, renderNode(updated, c.v, c.base, nil))
	return nil
}

// patchMachine applies ops to m's node object and returns the fields
// that changed with their new values, after checking that only
// patchable fields of version v change and that each keeps its type.
func patchMachine(m *config.Machine, v Version, ops []jsonpatch.Op) (map[string]any, error) {
	names := make([]string, 0, len(nodePatchable))
	for k := range nodePatchable {
		names = append(names, k)
	}
	slices.Sort(names)
	doc := jsonpatch.Clone(nodeDoc(m, v, nil)).(map[string]any)
	return patchDoc(doc, ops, v, nodeFieldMin, nodePatchable, names, func(name string, val any) error {
		if name == "name" && val != nil {
			return checkName(val.(string))
		}
		return nil
	})
}

// patchDoc is the PATCH logic shared by nodes and ports: allowed top-level
// fields only, none newer than v, no new root members, then the patch, then
// each changed field's type.
func patchDoc(doc map[string]any, ops []jsonpatch.Op, v Version, minMinor map[string]int, allowed map[string]fieldKind,
	names []string, check func(string, any) error) (map[string]any, error) {
	for _, op := range ops {
		for _, p := range []string{op.Path, op.From} {
			if p == "" {
				continue
			}
			f := jsonpatch.Field(p)
			if _, ok := allowed[f]; !ok {
				return nil, errorf(http.StatusBadRequest, "Cannot patch %s. Only the following can be updated: %s", p, strings.Join(names, ", "))
			}
			if !v.AtLeast(minMinor[f]) {
				return nil, notAcceptable("Request not acceptable.")
			}
		}
		if op.Op == "add" && strings.Count(op.Path, "/") == 1 {
			if _, ok := doc[jsonpatch.Field(op.Path)]; !ok {
				return nil, errorf(http.StatusBadRequest, "Adding a new attribute (%s) to the root of the resource is not allowed", op.Path)
			}
		}
	}
	before := jsonpatch.Clone(doc).(map[string]any)
	out, err := jsonpatch.Apply(doc, ops)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%s", err.Error())
	}
	after, ok := out.(map[string]any)
	if !ok {
		return nil, errorf(http.StatusBadRequest, "The patch must leave an object.")
	}
	changed := map[string]any{}
	for name, kind := range allowed {
		old, newv := before[name], after[name]
		if reflect.DeepEqual(old, newv) {
			continue
		}
		if err := checkKind(name, kind, newv); err != nil {
			return nil, err
		}
		if err := check(name, newv); err != nil {
			return nil, err
		}
		changed[name] = newv
	}
	return changed, nil
}

// checkKind refuses a value of the wrong JSON type (null clears a field).
func checkKind(name string, kind fieldKind, v any) error {
	if v == nil {
		return nil
	}
	ok := false
	switch kind {
	case kindString:
		_, ok = v.(string)
	case kindDict:
		_, ok = v.(map[string]any)
	case kindBool:
		_, ok = v.(bool)
	}
	if !ok {
		return errorf(http.StatusBadRequest, "Invalid value for %s: wrong type", name)
	}
	return nil
}
