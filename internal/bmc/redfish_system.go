package bmc

import (
	"net/http"
	"slices"
	"strings"
)

func (s *Redfish) system(w http.ResponseWriter, r *http.Request, m *Machine, rest []string) {
	switch {
	case len(rest) == 0:
		if !onlyMethods(w, r, http.MethodGet, http.MethodPatch) {
			return
		}
		if r.Method == http.MethodPatch {
			s.patchSystem(w, r, m)
			return
		}
		s.getSystem(w, m)
	case len(rest) == 2 && rest[0] == "Actions" && rest[1] == "ComputerSystem.Reset":
		if onlyMethods(w, r, http.MethodPost) {
			s.reset(w, r, m)
		}
	default:
		redfishError(w, http.StatusNotFound, "Base.1.0.ResourceMissingAtURI", "no resource at "+r.URL.Path)
	}
}

func (s *Redfish) systemPath(m *Machine) string { return redfishRoot + "/Systems/" + m.Config.Name }

func (s *Redfish) getSystem(w http.ResponseWriter, m *Machine) {
	boot, err := m.BootOverride()
	if err != nil {
		s.chassisFailed(w, "read boot override", err)
		return
	}
	power := "Off"
	if m.PoweredOn() {
		power = "On"
	}
	enabled := "Disabled"
	if boot.Device != BootNone {
		enabled = "Once"
		if boot.Persistent {
			enabled = "Continuous"
		}
	}
	targets := []string{"None", "Pxe", "Cd", "Hdd", "BiosSetup"}
	path := s.systemPath(m)
	body := map[string]any{
		"@odata.id":    path,
		"@odata.type":  "#ComputerSystem.v1_10_0.ComputerSystem",
		"Id":           m.Config.Name,
		"Name":         m.Config.Name,
		"SystemType":   "Physical",
		"Manufacturer": "Corral",
		"Model":        "qemu",
		"PowerState":   power,
		"Status":       map[string]any{"State": "Enabled", "Health": "OK"},
		"MemorySummary": map[string]any{
			"TotalSystemMemoryGiB": float64(memoryMB(m)) / 1024,
		},
		"Boot": map[string]any{
			"BootSourceOverrideTarget":                         redfishTarget(boot.Device),
			"BootSourceOverrideEnabled":                        enabled,
			"BootSourceOverrideMode":                           "Legacy",
			"BootSourceOverrideTarget@Redfish.AllowableValues": targets,
		},
		"Actions": map[string]any{
			"#ComputerSystem.Reset": map[string]any{
				"target":                            path + "/Actions/ComputerSystem.Reset",
				"ResetType@Redfish.AllowableValues": resetTypes,
			},
		},
		"Links": map[string]any{
			"ManagedBy": []any{odataID(redfishRoot + "/Managers/" + m.Config.Name)},
		},
	}
	writeJSON(w, http.StatusOK, body)
}

func memoryMB(m *Machine) int {
	if m.Config.MemoryMB == 0 {
		return defaultMem
	}
	return m.Config.MemoryMB
}

// patchSystem changes the boot override, the one writable part of a system.
func (s *Redfish) patchSystem(w http.ResponseWriter, r *http.Request, m *Machine) {
	var req struct {
		Boot *struct {
			Target  *string `json:"BootSourceOverrideTarget"`
			Enabled *string `json:"BootSourceOverrideEnabled"`
			Mode    *string `json:"BootSourceOverrideMode"`
		} `json:"Boot"`
	}
	if !readBody(w, r, &req) {
		return
	}
	if req.Boot == nil {
		redfishError(w, http.StatusBadRequest, "Base.1.0.PropertyNotWritable", "only Boot can be changed")
		return
	}
	cur, err := m.BootOverride()
	if err != nil {
		s.chassisFailed(w, "read boot override", err)
		return
	}
	next := cur
	if req.Boot.Target != nil {
		dev, err := bootTarget(*req.Boot.Target)
		if err != nil {
			redfishError(w, http.StatusBadRequest, "Base.1.0.PropertyValueNotInList", err.Error())
			return
		}
		next.Device = dev
	}
	if req.Boot.Enabled != nil {
		switch *req.Boot.Enabled {
		case "Once":
			next.Persistent = false
		case "Continuous":
			next.Persistent = true
		case "Disabled":
			next = BootOverride{Device: BootNone}
		default:
			redfishError(w, http.StatusBadRequest, "Base.1.0.PropertyValueNotInList",
				"BootSourceOverrideEnabled "+*req.Boot.Enabled+" is not Once, Continuous or Disabled")
			return
		}
	} else if req.Boot.Target != nil && cur.Device == BootNone {
		// A new target without a frequency lasts one boot.
		next.Persistent = false
	}
	if req.Boot.Mode != nil && *req.Boot.Mode != "Legacy" {
		redfishError(w, http.StatusBadRequest, "Base.1.0.PropertyValueNotInList", "this machine boots in Legacy mode only")
		return
	}
	if err := m.SetBootOverride(next); err != nil {
		s.chassisFailed(w, "set boot override", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Redfish) reset(w http.ResponseWriter, r *http.Request, m *Machine) {
	var req struct {
		ResetType string `json:"ResetType"`
	}
	if !readBody(w, r, &req) {
		return
	}
	if !slices.Contains(resetTypes, req.ResetType) {
		redfishError(w, http.StatusBadRequest, "Base.1.0.ActionParameterValueNotInList",
			"ResetType "+req.ResetType+" is not one of "+strings.Join(resetTypes, ", "))
		return
	}
	ctx, cancel := actionContext()
	defer cancel()
	var err error
	switch req.ResetType {
	case "On":
		err = m.PowerOn(ctx)
	case "ForceOff":
		err = m.PowerOff(ctx)
	case "GracefulShutdown":
		err = m.SoftOff(ctx)
	case "ForceRestart":
		if m.PoweredOn() {
			err = m.Reset(ctx)
		} else {
			err = m.PowerOn(ctx)
		}
	case "GracefulRestart":
		err = m.GracefulRestart(ctx, gracefulRestartWait)
	case "PushPowerButton":
		if m.PoweredOn() {
			err = m.SoftOff(ctx)
		} else {
			err = m.PowerOn(ctx)
		}
	}
	if err != nil {
		s.chassisFailed(w, "reset "+req.ResetType, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
