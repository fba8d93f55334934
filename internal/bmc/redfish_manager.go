package bmc

import (
	"net/http"
)

func (s *Redfish) managerPath(m *Machine) string { return redfishRoot + "/Managers/" + m.Config.Name }

func (s *Redfish) manager(w http.ResponseWriter, r *http.Request, m *Machine, rest []string) {
	path := s.managerPath(m)
	switch {
	case len(rest) == 0:
		if !onlyMethods(w, r, http.MethodGet) {
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"@odata.id":    path,
			"@odata.type":  "#Manager.v1_5_0.Manager",
			"Id":           m.Config.Name,
			"Name":         "BMC of " + m.Config.Name,
			"ManagerType":  "BMC",
			"Status":       map[string]any{"State": "Enabled", "Health": "OK"},
			"VirtualMedia": odataID(path + "/VirtualMedia"),
			"Links": map[string]any{
				"ManagerForServers": []any{odataID(s.systemPath(m))},
			},
		})
	case len(rest) == 1 && rest[0] == "VirtualMedia":
		if !onlyMethods(w, r, http.MethodGet) {
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"@odata.id":           path + "/VirtualMedia",
			"@odata.type":         "#VirtualMediaCollection.VirtualMediaCollection",
			"Name":                "Virtual Media Services",
			"Members":             []any{odataID(path + "/VirtualMedia/Cd")},
			"Members@odata.count": 1,
		})
	case len(rest) == 2 && rest[0] == "VirtualMedia" && rest[1] == "Cd":
		if onlyMethods(w, r, http.MethodGet) {
			s.getVirtualCD(w, m)
		}
	case len(rest) == 4 && rest[0] == "VirtualMedia" && rest[1] == "Cd" && rest[2] == "Actions":
		if !onlyMethods(w, r, http.MethodPost) {
			return
		}
		switch rest[3] {
		case "VirtualMedia.InsertMedia":
			s.insertMedia(w, r, m)
		case "VirtualMedia.EjectMedia":
			s.ejectMedia(w, r, m)
		default:
			redfishError(w, http.StatusNotFound, "Base.1.0.ActionNotSupported", "no action at "+r.URL.Path)
		}
	default:
		redfishError(w, http.StatusNotFound, "Base.1.0.ResourceMissingAtURI", "no resource at "+r.URL.Path)
	}
}

func (s *Redfish) getVirtualCD(w http.ResponseWriter, m *Machine) {
	md, err := m.Media()
	if err != nil {
		s.chassisFailed(w, "read virtual media", err)
		return
	}
	path := s.managerPath(m) + "/VirtualMedia/Cd"
	var image, imageName any
	connected := "NotConnected"
	if md.Inserted {
		image, imageName, connected = md.Image, baseName(md.Image), "URI"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":      path,
		"@odata.type":    "#VirtualMedia.v1_3_0.VirtualMedia",
		"Id":             "Cd",
		"Name":           "Virtual CD",
		"MediaTypes":     []string{"CD", "DVD"},
		"Image":          image,
		"ImageName":      imageName,
		"Inserted":       md.Inserted,
		"WriteProtected": true,
		"ConnectedVia":   connected,
		"Actions": map[string]any{
			"#VirtualMedia.InsertMedia": map[string]any{"target": path + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  map[string]any{"target": path + "/Actions/VirtualMedia.EjectMedia"},
		},
	})
}

func baseName(image string) string {
	for i := len(image) - 1; i >= 0; i-- {
		if image[i] == '/' {
			return image[i+1:]
		}
	}
	return image
}

func (s *Redfish) insertMedia(w http.ResponseWriter, r *http.Request, m *Machine) {
	var req struct {
		Image          string `json:"Image"`
		Inserted       *bool  `json:"Inserted"`
		WriteProtected *bool  `json:"WriteProtected"`
	}
	if !readBody(w, r, &req) {
		return
	}
	if req.Image == "" {
		redfishError(w, http.StatusBadRequest, "Base.1.0.ActionParameterMissing", "InsertMedia needs Image")
		return
	}
	if req.Inserted != nil && !*req.Inserted {
		redfishError(w, http.StatusBadRequest, "Base.1.0.ActionParameterNotSupported", "Inserted=false is not supported; use EjectMedia")
		return
	}
	if req.WriteProtected != nil && !*req.WriteProtected {
		redfishError(w, http.StatusBadRequest, "Base.1.0.ActionParameterNotSupported", "the virtual CD is read-only")
		return
	}
	ctx, cancel := actionContext()
	defer cancel()
	if err := m.InsertMedia(ctx, req.Image); err != nil {
		s.chassisFailed(w, "insert virtual media", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Redfish) ejectMedia(w http.ResponseWriter, r *http.Request, m *Machine) {
	var req map[string]any
	if !readBody(w, r, &req) {
		return
	}
	ctx, cancel := actionContext()
	defer cancel()
	if err := m.EjectMedia(ctx); err != nil {
		s.chassisFailed(w, "eject virtual media", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
