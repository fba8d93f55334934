package baremetalapi

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// maxLimit is the most items one list answer holds (Ironic's default).
const maxLimit = 1000

// getMachine fetches a machine, turning any "not found" into Ironic's
// text whatever the backend said.
func (h *Handler) getMachine(r *http.Request, ident string) (*config.Machine, error) {
	m, err := h.be.GetMachine(r.Context(), ident)
	return m, nodeErr(err, ident)
}

// nodeErr gives a NoEnt about a machine Ironic's 404 text.
func nodeErr(err error, ident string) error {
	if err != nil && ecode.ClassOf(err) == ecode.NoEnt {
		return ErrNodeNotFound(ident)
	}
	return err
}

// listQuery is a list's paging and sorting.
type listQuery struct {
	limit   int
	marker  string
	sortKey string
	sortDir string
	fields  []string
	detail  bool
}

func parseListQuery(q url.Values, c *call, sortable map[string]bool) (listQuery, error) {
	lq := listQuery{limit: maxLimit, sortKey: "id", sortDir: "asc", marker: q.Get("marker")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return lq, errorf(http.StatusBadRequest, "Limit must be positive")
		}
		lq.limit = min(n, maxLimit)
	}
	if s := q.Get("sort_dir"); s != "" {
		if s != "asc" && s != "desc" {
			return lq, errorf(http.StatusBadRequest, "Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", s)
		}
		lq.sortDir = s
	}
	if s := q.Get("sort_key"); s != "" {
		if !sortable[s] {
			return lq, errorf(http.StatusBadRequest, "The sort_key value \"%s\" is an invalid field for sorting", s)
		}
		lq.sortKey = s
	}
	if s := q.Get("fields"); s != "" {
		if !c.v.AtLeast(v8Fields) {
			return lq, notAcceptable("Request not acceptable.")
		}
		lq.fields = strings.Split(s, ",")
	}
	if s := q.Get("detail"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return lq, errorf(http.StatusBadRequest, "Invalid value for detail: %s", s)
		}
		lq.detail = b
	}
	return lq, nil
}

// page sorts items, starts after the marker and cuts at the limit; next
// is the marker of a further page ("" when this is the last).
func page[T any](items []T, lq listQuery, key func(T, string) string, uuid func(T) string) ([]T, string, error) {
	slices.SortStableFunc(items, func(a, b T) int {
		c := cmp.Compare(key(a, lq.sortKey), key(b, lq.sortKey))
		if c == 0 {
			c = cmp.Compare(uuid(a), uuid(b))
		}
		if lq.sortDir == "desc" {
			c = -c
		}
		return c
	})
	if lq.marker != "" {
		i := slices.IndexFunc(items, func(t T) bool { return uuid(t) == lq.marker })
		if i < 0 {
			return nil, "", errorf(http.StatusBadRequest, "Marker %s could not be found.", lq.marker)
		}
		items = items[i+1:]
	}
	if len(items) > lq.limit {
		items = items[:lq.limit]
		return items, uuid(items[len(items)-1]), nil
	}
	return items, "", nil
}

// nodeSortKeys are the sortable node fields (Ironic refuses the dict ones).
var nodeSortKeys = map[string]bool{"id": true, "uuid": true, "name": true, "created_at": true, "updated_at": true,
	"provision_state": true, "provision_updated_at": true, "driver": true, "power_state": true,
	"maintenance": true, "instance_uuid": true, "conductor_group": true, "resource_class": true, "owner": true}

func machineSortValue(m *config.Machine, key string) string {
	switch key {
	case "id", "created_at":
		return isoSortable(m.CTime)
	case "updated_at":
		return isoSortable(m.MTime)
	case "provision_updated_at":
		return isoSortable(m.ProvisionUpdated)
	case "uuid":
		return m.UUID
	case "name":
		return m.Name
	case "provision_state":
		return m.ProvisionState
	case "driver":
		return m.Driver
	case "power_state":
		return m.PowerState
	case "maintenance":
		return strconv.FormatBool(m.Maintenance)
	case "instance_uuid":
		return m.InstanceUUID
	case "conductor_group":
		return m.ConductorGroup
	case "resource_class":
		return m.ResourceClass
	case "owner":
		return m.Owner
	}
	return ""
}

// isoSortable is a Unix time as a string that sorts as the time.
func isoSortable(t float64) string { return fmt.Sprintf("%020.6f", t) }

// machineFilter reads a node list's filters; each needs the version that
// introduced it (406 before).
func machineFilter(q url.Values, c *call) (MachineFilter, error) {
	var f MachineFilter
	strs := []struct {
		name  string
		minor int
		dst   *string
	}{
		{"provision_state", v9ProvisionFilter, &f.ProvisionState},
		{"driver", v16DriverFilter, &f.Driver},
		{"resource_class", v21ResourceClass, &f.ResourceClass},
		{"fault", v42Fault, &f.Fault},
		{"conductor_group", v46ConductorGroup, &f.ConductorGroup},
		{"owner", v50Owner, &f.Owner},
	}
	for _, s := range strs {
		if val := q.Get(s.name); val != "" {
			if !c.v.AtLeast(s.minor) {
				return f, notAcceptable("Request not acceptable.")
			}
			*s.dst = val
		}
	}
	bools := []struct {
		name string
		dst  **bool
	}{{"maintenance", &f.Maintenance}, {"associated", &f.Associated}}
	for _, b := range bools {
		if val := q.Get(b.name); val != "" {
			v, err := strconv.ParseBool(val)
			if err != nil {
				return f, errorf(http.StatusBadRequest, "Invalid value for %s: %s is not a boolean", b.name, val)
			}
			*b.dst = &v
		}
	}
	return f, nil
}

func (h *Handler) listNodes(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.listMachines(w, r, c, false)
}

func (h *Handler) listNodesDetail(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.listMachines(w, r, c, true)
}

func (h *Handler) listMachines(w http.ResponseWriter, r *http.Request, c *call, detail bool) error {
	q := r.URL.Query()
	f, err := machineFilter(q, c)
	if err != nil {
		return err
	}
	lq, err := parseListQuery(q, c, nodeSortKeys)
	if err != nil {
		return err
	}
	if detail && lq.fields != nil {
		return errorf(http.StatusBadRequest, "Can not specify ?detail=True and fields in the same request.")
	}
	detail = detail || lq.detail
	ms, err := h.be.ListMachines(r.Context(), f)
	if err != nil {
		return err
	}
	ms, next, err := page(ms, lq, machineSortValue, func(m *config.Machine) string { return m.UUID })
	if err != nil {
		return err
	}
	fields := lq.fields
	if fields == nil && !detail {
		fields = nodeListFields
	}
	nodes := make([]any, len(ms))
	for i, m := range ms {
		nodes[i] = renderNode(m, c.v, c.base, fields)
	}
	res := map[string]any{"nodes": nodes}
	if next != "" {
		path := "/v1/nodes"
		if r.URL.Path == "/v1/nodes/detail" {
			path += "/detail"
		}
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("limit", strconv.Itoa(lq.limit))
		nq.Set("marker", next)
		res["next"] = c.base + path + "?" + nq.Encode()
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (h *Handler) showNode(w http.ResponseWriter, r *http.Request, c *call) error {
	var fields []string
	if s := r.URL.Query().Get("fields"); s != "" {
		if !c.v.AtLeast(v8Fields) {
			return notAcceptable("Request not acceptable.")
		}
		fields = strings.Split(s, ",")
	}
	m, err := h.getMachine(r, r.PathValue("ident"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderNode(m, c.v, c.base, fields))
	return nil
}

// nodeCreateFields are the members a node create takes.
var nodeCreateFields = []string{"driver", "name", "uuid", "description", "driver_info", "extra", "properties",
	"instance_info", "instance_uuid", "resource_class", "conductor_group", "owner", "lessee", "automated_clean",
	"bios_interface", "boot_interface", "console_interface", "deploy_interface", "inspect_interface",
	"management_interface", "network_interface", "power_interface", "raid_interface", "rescue_interface",
	"storage_interface", "vendor_interface"}

var (
	uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)
	// nameRE is RFC 3986's unreserved characters, Ironic's node names.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
)

// checkName refuses what Ironic refuses as a node name: anything outside
// the unreserved characters, and uuids (which would shadow a uuid).
func checkName(name string) error {
	if !nameRE.MatchString(name) || uuidRE.MatchString(name) {
		return errorf(http.StatusBadRequest, "Expected a logical name but received %s.", name)
	}
	return nil
}

func (h *Handler) createNode(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		return err
	}
	m, err := decodeNodeCreate(body, c.v)
	if err != nil {
		return err
	}
	created, err := h.be.CreateMachine(r.Context(), m)
	if err != nil {
		return err
	}
	w.Header().Set("Location", c.base+"/v1/nodes/"+created.UUID)
	writeJSON(w, http.StatusCreated, renderNode(created, c.v, c.base, nil))
	return nil
}

// decodeNodeCreate turns a node create body into the machine to store.
func decodeNodeCreate(body []byte, v Version) (*config.Machine, error) {
	obj, err := decodeObject(body, nodeCreateFields, false)
	if err != nil {
		return nil, err
	}
	for k := range obj {
		if !v.AtLeast(nodeFieldMin[k]) {
			return nil, notAcceptable("Request not acceptable.")
		}
	}
	m := &config.Machine{}
	strs := map[string]*string{"driver": &m.Driver, "name": &m.Name, "uuid": &m.UUID, "description": &m.Description,
		"instance_uuid": &m.InstanceUUID, "resource_class": &m.ResourceClass, "conductor_group": &m.ConductorGroup,
		"owner": &m.Owner, "lessee": &m.Lessee}
	for k, dst := range ifaceFields(&m.Interfaces) {
		strs[k] = dst
	}
	for k, dst := range strs {
		var s *string
		if _, err := member(obj, k, &s); err != nil {
			return nil, err
		}
		if s != nil {
			*dst = *s
		}
	}
	dicts := map[string]*map[string]any{"driver_info": &m.DriverInfo, "extra": &m.Extra,
		"properties": &m.Properties, "instance_info": &m.InstanceInfo}
	for k, dst := range dicts {
		if _, err := member(obj, k, dst); err != nil {
			return nil, err
		}
	}
	if _, err := member(obj, "automated_clean", &m.AutomatedClean); err != nil {
		return nil, err
	}
	if m.Driver == "" {
		return nil, errorf(http.StatusBadRequest, "'driver' is a required property")
	}
	if m.Name != "" {
		if err := checkName(m.Name); err != nil {
			return nil, err
		}
	}
	if m.UUID == "" {
		m.UUID = config.NewUUID()
	} else if !uuidRE.MatchString(m.UUID) {
		return nil, errorf(http.StatusBadRequest, "Expected a UUID but received %s.", m.UUID)
	}
	m.UUID = strings.ToLower(m.UUID)
	m.ConductorGroup = strings.ToLower(m.ConductorGroup)
	// Since 1.11 machines start in enroll; before, they were ready at once.
	m.ProvisionState = "available"
	if v.AtLeast(v11Enroll) {
		m.ProvisionState = "enroll"
	}
	return m, nil
}

// ifaceFields maps each *_interface field to where it is kept.
func ifaceFields(i *config.MachineInterfaces) map[string]*string {
	return map[string]*string{"bios_interface": &i.Bios, "boot_interface": &i.Boot, "console_interface": &i.Console,
		"deploy_interface": &i.Deploy, "inspect_interface": &i.Inspect, "management_interface": &i.Management,
		"network_interface": &i.Network, "power_interface": &i.Power, "raid_interface": &i.Raid,
		"rescue_interface": &i.Rescue, "storage_interface": &i.Storage, "vendor_interface": &i.Vendor}
}

func (h *Handler) deleteNode(w http.ResponseWriter, r *http.Request, c *call) error {
	ident := r.PathValue("ident")
	if err := h.be.DeleteMachine(r.Context(), ident); err != nil {
		return nodeErr(err, ident)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
