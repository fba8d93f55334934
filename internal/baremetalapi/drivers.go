package baremetalapi

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"

	"github.com/corral/corral/internal/ecode"
)

// driverInterfaces are the hardware interfaces a driver's detail lists.
var driverInterfaces = []string{"bios", "boot", "console", "deploy", "inspect", "management", "network",
	"power", "raid", "rescue", "storage", "vendor"}

func renderDriver(d Driver, c *call, detail bool) map[string]any {
	self := c.base + "/v1/drivers/" + d.Name
	hosts := d.Hosts
	if hosts == nil {
		hosts = []string{}
	}
	out := map[string]any{
		"name":       d.Name,
		"hosts":      hosts,
		"links":      links(self, c.base+"/drivers/"+d.Name),
		"properties": links(self+"/properties", c.base+"/drivers/"+d.Name+"/properties"),
	}
	if c.v.AtLeast(v30DynamicDrivers) {
		out["type"] = "dynamic"
	}
	if detail && c.v.AtLeast(v30DynamicDrivers) {
		for _, iface := range driverInterfaces {
			if !c.v.AtLeast(nodeFieldMin[iface+"_interface"]) {
				continue
			}
			enabled := d.Enabled[iface]
			if enabled == nil {
				enabled = []string{}
			}
			out["enabled_"+iface+"_interfaces"] = enabled
			out["default_"+iface+"_interface"] = str(d.Default[iface])
		}
	}
	return out
}

func (h *Handler) listDrivers(w http.ResponseWriter, r *http.Request, c *call) error {
	detail := false
	if s := r.URL.Query().Get("detail"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errorf(http.StatusBadRequest, "Invalid value for detail: %s", s)
		}
		detail = b
	}
	ds, err := h.be.Drivers(r.Context())
	if err != nil {
		return err
	}
	slices.SortFunc(ds, func(a, b Driver) int { return cmp.Compare(a.Name, b.Name) })
	out := make([]any, len(ds))
	for i, d := range ds {
		out[i] = renderDriver(d, c, detail)
	}
	writeJSON(w, http.StatusOK, map[string]any{"drivers": out})
	return nil
}

func (h *Handler) findDriver(r *http.Request) (Driver, error) {
	name := r.PathValue("name")
	ds, err := h.be.Drivers(r.Context())
	if err != nil {
		return Driver{}, err
	}
	for _, d := range ds {
		if d.Name == name {
			return d, nil
		}
	}
	return Driver{}, ecode.Errorf(ecode.NoEnt, "Could not find the following driver(s) or hardware type(s): %s.", name)
}

func (h *Handler) showDriver(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.findDriver(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderDriver(d, c, true))
	return nil
}

func (h *Handler) driverProperties(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.findDriver(r)
	if err != nil {
		return err
	}
	props := d.Properties
	if props == nil {
		props = map[string]string{}
	}
	writeJSON(w, http.StatusOK, props)
	return nil
}
