package rapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/opcodes"
)

// Field lists of Ganeti's rlib2 (spec 1.8), as Ganeti 3.0.2 answers them:
// its instances carry no custom_osparams and /2/info has software_version.
var (
	instanceFields = []string{"name", "admin_state", "os", "pnode", "snodes", "disk_template",
		"nic.ips", "nic.macs", "nic.modes", "nic.uuids", "nic.names", "nic.links", "nic.networks",
		"nic.networks.names", "nic.bridges", "network_port", "disk.sizes", "disk.spindles",
		"disk_usage", "disk.uuids", "disk.names", "beparams", "hvparams", "oper_state", "oper_ram",
		"oper_vcpus", "status", "custom_hvparams", "custom_beparams", "custom_nicparams",
		"ctime", "mtime", "uuid", "serial_no", "tags"}
	nodeFields = []string{"name", "offline", "master_candidate", "drained", "dtotal", "dfree",
		"sptotal", "spfree", "mtotal", "mnode", "mfree", "pinst_cnt", "sinst_cnt", "ctotal", "cnos",
		"cnodes", "csockets", "pip", "sip", "role", "pinst_list", "sinst_list", "master_capable",
		"vm_capable", "ndparams", "group.uuid", "ctime", "mtime", "uuid", "serial_no", "tags"}
	// nodeFieldsAbsent are node fields corrald does not compute yet; they
	// are answered as null, which Ganeti also sends for unavailable data.
	nodeFieldsAbsent = map[string]bool{"sptotal": true, "spfree": true, "cnos": true, "cnodes": true, "csockets": true}
	jobFieldsBulk    = []string{"id", "ops", "status", "summary", "opstatus", "received_ts", "start_ts", "end_ts"}
	jobFields        = append(slices.Clone(jobFieldsBulk), "oplog", "opresult")
	infoKeys         = []string{"software_version", "protocol_version", "config_version", "os_api_version", "export_version",
		"vcs_version", "architecture", "name", "master", "default_hypervisor", "enabled_hypervisors",
		"hvparams", "os_hvp", "beparams", "osparams", "ipolicy", "nicparams", "ndparams", "diskparams",
		"candidate_pool_size", "max_running_jobs", "max_tracked_jobs", "mac_prefix", "master_netdev",
		"master_netmask", "use_external_mip_script", "volume_group_name", "drbd_usermode_helper",
		"file_storage_dir", "shared_file_storage_dir", "gluster_storage_dir", "maintain_node_health",
		"ctime", "mtime", "uuid", "tags", "uid_pool", "default_iallocator", "default_iallocator_params",
		"reserved_lvs", "primary_ip_version", "prealloc_wipe_disks", "hidden_os", "blacklisted_os",
		"enabled_disk_templates", "install_image", "instance_communication_network", "zeroing_image",
		"compression_tools", "enabled_user_shutdown", "enabled_data_collectors",
		"data_collector_interval", "modify_ssh_setup", "ssh_key_type", "ssh_key_bits"}
	roleNames = map[string]string{"M": "master", "C": "master-candidate", "R": "regular", "D": "drained", "O": "offline"}
)

// features lists only what Corral implements: clients probe this list.
var features = []string{"instance-create-reqv1", "instance-reinstall-reqv1"}

// waitTimeout bounds one /2/jobs/[id]/wait, in seconds; clients loop.
const waitTimeout = 10

func (h *Handler) info(ctx context.Context, _ *request) (any, error) {
	ci, err := h.be.QueryClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(infoKeys)+2)
	for _, k := range infoKeys {
		out[k] = ci[k]
	}
	out["vg_name"] = ci["volume_group_name"]
	out["drbd_helper"] = ci["drbd_usermode_helper"]
	return out, nil
}

func (h *Handler) features(context.Context, *request) (any, error) {
	return features, nil
}

func (h *Handler) tagsGet(kind string) handlerFunc {
	return func(ctx context.Context, rq *request) (any, error) {
		name := ""
		if len(rq.params) > 0 {
			name = rq.params[0]
		}
		tags, err := h.be.QueryTags(ctx, kind, name)
		if err != nil {
			return nil, notFoundIfNoEnt(err)
		}
		if tags == nil {
			tags = []string{}
		}
		return tags, nil
	}
}

// notFoundIfNoEnt turns an unknown-entity error into Ganeti's bare 404.
func notFoundIfNoEnt(err error) error {
	if ecode.ClassOf(err) == ecode.NoEnt {
		return errNotFound
	}
	return err
}

// rowsToDicts zips field names with each row's values.
func rowsToDicts(fields []string, rows [][]any) []map[string]any {
	out := make([]map[string]any, 0, len(rows))
	for _, row := range rows {
		if row == nil {
			continue
		}
		m := make(map[string]any, len(fields))
		for i, f := range fields {
			if i < len(row) {
				m[f] = row[i]
			} else {
				m[f] = nil
			}
		}
		out = append(out, m)
	}
	return out
}

func nameList(rows [][]any, key, prefix string) []map[string]any {
	names := make([]string, 0, len(rows))
	for _, row := range rows {
		if len(row) > 0 {
			if s, ok := row[0].(string); ok {
				names = append(names, s)
			}
		}
	}
	sort.Strings(names)
	out := make([]map[string]any, len(names))
	for i, n := range names {
		out[i] = map[string]any{key: n, "uri": prefix + n}
	}
	return out
}

// Instances.

// instances is the /2/instances collection. Ganeti keeps "memory" beside
// maxmem in beparams for old clients.
var instances = collection{
	fields: instanceFields, idKey: "id", prefix: "/2/instances/",
	query: Backend.QueryInstances,
	adjust: func(m map[string]any) {
		if be, ok := m["beparams"].(map[string]any); ok {
			if v, ok := be["maxmem"]; ok {
				be["memory"] = v
			}
		}
	},
}

func (h *Handler) instanceInfo(ctx context.Context, rq *request) (any, error) {
	static, err := rq.intParam("static", 0)
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_INSTANCE_QUERY_DATA", map[string]any{
		"instances": []any{rq.params[0]}, "static": static != 0,
	}, nil)
}

// instanceAction answers a request that submits one opcode on the
// instance named in the path: flags are the query flags that map to its
// static parameters, bodyKeys (nil: any) the body keys it takes, and
// extra, if set, adds parameters from the query.
func (h *Handler) instanceAction(opID string, bodyKeys []string, flags []string, extra func(rq *request, static map[string]any)) handlerFunc {
	return func(ctx context.Context, rq *request) (any, error) {
		static, err := rq.staticParams(map[string]any{"instance_name": rq.params[0]}, flags...)
		if err != nil {
			return nil, err
		}
		if extra != nil {
			extra(rq, static)
		}
		body, err := rq.bodyDict(bodyKeys)
		if err != nil {
			return nil, err
		}
		return h.submit(ctx, rq, opID, static, body)
	}
}

// rebootType passes ?type= on as the reboot type.
func rebootType(rq *request, static map[string]any) {
	if t := rq.query["type"]; len(t) > 0 {
		static["reboot_type"] = t[0]
	}
}

func (h *Handler) instanceCreate(ctx context.Context, rq *request) (any, error) {
	body, err := DecodeCreateBody(rq.body)
	if err != nil {
		return nil, err
	}
	if _, ok := body["disk_template"]; !ok {
		// Ganeti defaults to the cluster's first enabled template.
		ci, err := h.be.QueryClusterInfo(ctx)
		if err != nil {
			return nil, err
		}
		if l, ok := ci["enabled_disk_templates"].([]any); ok && len(l) > 0 {
			body["disk_template"] = l[0]
		}
	}
	static, err := rq.staticParams(map[string]any{}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_INSTANCE_CREATE", static, body)
}

// DecodeCreateBody checks a POST /2/instances body (spec 1.7): a dict with
// __version__ 1, whose aliases name and os become instance_name and
// os_type. It returns the opcode parameters.
func DecodeCreateBody(body any) (map[string]any, error) {
	m, ok := body.(map[string]any)
	if !ok {
		return nil, errf(http.StatusBadRequest, "Invalid body contents, not a dictionary")
	}
	ver, present := m["__version__"]
	switch v, isNum := ver.(float64); {
	case !present || (isNum && v == 0):
		return nil, errf(http.StatusBadRequest, "Instance creation request version 0 is no longer supported")
	case !isNum || v != 1:
		return nil, errf(http.StatusBadRequest, "Unsupported request data version %v", ver)
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "__version__" {
			out[k] = v
		}
	}
	for alias, name := range map[string]string{"name": "instance_name", "os": "os_type"} {
		v, ok := out[alias]
		if !ok {
			continue
		}
		if _, both := out[name]; both {
			return nil, errf(http.StatusBadRequest, "Parameter '%s' has been renamed to '%s'; both were given", alias, name)
		}
		out[name] = v
		delete(out, alias)
	}
	return out, nil
}

// Nodes.

// nodes is the /2/nodes collection; an item also carries secondary_ip.
var nodes = collection{
	fields: nodeFields, absent: nodeFieldsAbsent, idKey: "id", prefix: "/2/nodes/",
	query:      Backend.QueryNodes,
	adjustItem: func(m map[string]any) { m["secondary_ip"] = m["sip"] },
}

func (h *Handler) nodeRole(ctx context.Context, rq *request) (any, error) {
	rows, err := h.be.QueryNodes(ctx, rq.params[:1], []string{"role"})
	if err != nil {
		return nil, notFoundIfNoEnt(err)
	}
	if len(rows) == 0 || len(rows[0]) == 0 {
		return nil, errNotFound
	}
	letter, _ := rows[0][0].(string)
	role, ok := roleNames[letter]
	if !ok {
		return nil, errf(http.StatusInternalServerError, "Unknown node role %q", letter)
	}
	return role, nil
}

// Jobs.

func (h *Handler) jobsList(ctx context.Context, rq *request) (any, error) {
	bulk, err := rq.intParam("bulk", 0)
	if err != nil {
		return nil, err
	}
	fields := []string{"id"}
	if bulk != 0 {
		fields = jobFieldsBulk
	}
	rows, err := h.be.QueryJobs(ctx, nil, fields)
	if err != nil {
		return nil, err
	}
	if bulk != 0 {
		h.redactJobs(rq, fields, rows)
		return rowsToDicts(fields, rows), nil
	}
	var ids []int64
	for _, row := range rows {
		if len(row) > 0 {
			if f, ok := row[0].(float64); ok {
				ids = append(ids, int64(f))
			}
		}
	}
	slices.Sort(ids)
	out := make([]map[string]any, len(ids))
	for i, id := range ids {
		out[i] = map[string]any{"id": id, "uri": "/2/jobs/" + strconv.FormatInt(id, 10)}
	}
	return out, nil
}

// redactJobs hides the private opcode parameters (osparams_private) of
// jobs from a caller without write rights, anonymous readers included;
// corrald has hidden the secret ones already, from everyone, and this hides
// them again should a backend not have.
func (h *Handler) redactJobs(rq *request, fields []string, rows [][]any) {
	from := opcodes.Private
	if rq.canWrite {
		from = opcodes.Secret
	}
	h.ops.RedactJobRows(fields, rows, from)
}

func jobIDParam(rq *request) (int64, error) {
	id, err := strconv.ParseInt(rq.params[0], 10, 64)
	if err != nil {
		return 0, errNotFound
	}
	return id, nil
}

func (h *Handler) jobGet(ctx context.Context, rq *request) (any, error) {
	id, err := jobIDParam(rq)
	if err != nil {
		return nil, err
	}
	rows, err := h.be.QueryJobs(ctx, []int64{id}, jobFields)
	if err != nil {
		return nil, notFoundIfNoEnt(err)
	}
	h.redactJobs(rq, jobFields, rows)
	out := rowsToDicts(jobFields, rows)
	if len(out) == 0 {
		return nil, errNotFound
	}
	return out[0], nil
}

func (h *Handler) jobCancel(ctx context.Context, rq *request) (any, error) {
	id, err := jobIDParam(rq)
	if err != nil {
		return nil, err
	}
	ok, msg, err := h.be.CancelJob(ctx, id)
	if err != nil {
		return nil, notFoundIfNoEnt(err)
	}
	return []any{ok, msg}, nil
}

// WaitBody is the body of /2/jobs/[id]/wait.
type WaitBody struct {
	Fields     []string
	PrevInfo   []any
	PrevSerial *int64
}

// DecodeWaitBody checks a /2/jobs/[id]/wait body: fields is a required list
// of strings; previous_job_info a list or null; previous_log_serial an
// integer or null.
func DecodeWaitBody(body any) (*WaitBody, error) {
	m, ok := body.(map[string]any)
	if !ok {
		return nil, errf(http.StatusBadRequest, "Invalid body contents, not a dictionary")
	}
	var wb WaitBody
	fl, ok := m["fields"].([]any)
	if !ok {
		return nil, errf(http.StatusBadRequest, "Missing or invalid 'fields' parameter, expected a list")
	}
	for _, f := range fl {
		s, ok := f.(string)
		if !ok {
			return nil, errf(http.StatusBadRequest, "Field names must be strings")
		}
		wb.Fields = append(wb.Fields, s)
	}
	switch v := m["previous_job_info"].(type) {
	case nil:
	case []any:
		wb.PrevInfo = v
	default:
		return nil, errf(http.StatusBadRequest, "'previous_job_info' must be a list or null")
	}
	switch v := m["previous_log_serial"].(type) {
	case nil:
	case float64:
		if v != float64(int64(v)) {
			return nil, errf(http.StatusBadRequest, "'previous_log_serial' must be an integer or null")
		}
		s := int64(v)
		wb.PrevSerial = &s
	default:
		return nil, errf(http.StatusBadRequest, "'previous_log_serial' must be an integer or null")
	}
	return &wb, nil
}

func (h *Handler) jobWait(ctx context.Context, rq *request) (any, error) {
	id, err := jobIDParam(rq)
	if err != nil {
		return nil, err
	}
	wb, err := DecodeWaitBody(rq.body)
	if err != nil {
		return nil, err
	}
	ch, err := h.be.WaitForJobChange(ctx, id, wb.Fields, wb.PrevInfo, wb.PrevSerial, waitTimeout)
	if err != nil {
		return nil, notFoundIfNoEnt(err)
	}
	if ch.NoChange {
		return nil, nil
	}
	logs := ch.LogEntries
	if logs == nil {
		logs = [][]any{}
	}
	return map[string]any{"job_info": ch.JobInfo, "log_entries": logs}, nil
}

// Queries.

func (h *Handler) query(ctx context.Context, rq *request) (any, error) {
	var fields []string
	var filter any
	if rq.r.Method == http.MethodPut {
		m, _ := rq.body.(map[string]any)
		if fl, ok := m["fields"].([]any); ok {
			for _, f := range fl {
				s, ok := f.(string)
				if !ok {
					return nil, errf(http.StatusBadRequest, "Field names must be strings")
				}
				fields = append(fields, s)
			}
		}
		filter = m["qfilter"]
		if filter == nil {
			filter = m["filter"]
		}
	}
	if fields == nil {
		q := rq.query["fields"]
		if len(q) == 0 {
			return nil, errf(http.StatusBadRequest, "Missing 'fields' query argument")
		}
		fields = strings.Split(q[0], ",")
	}
	res, err := h.be.Query(ctx, rq.params[0], fields, filter)
	if err != nil {
		return nil, err
	}
	if rq.params[0] == "job" && res != nil {
		h.redactJobQuery(rq, res)
	}
	return res, nil
}

// redactJobQuery applies redactJobs to a new-style job query's cells.
func (h *Handler) redactJobQuery(rq *request, res *luxi.QueryResult) {
	fields := make([]string, len(res.Fields))
	for i, f := range res.Fields {
		fields[i] = f.Name
	}
	for _, row := range res.Data {
		vals := make([]any, len(row))
		for i := range row {
			vals[i] = row[i][1]
		}
		h.redactJobs(rq, fields, [][]any{vals})
		for i := range row {
			row[i][1] = vals[i]
		}
	}
}

func (h *Handler) queryFields(ctx context.Context, rq *request) (any, error) {
	var fields []string
	if q := rq.query["fields"]; len(q) > 0 {
		fields = strings.Split(q[0], ",")
	}
	return h.be.QueryFields(ctx, rq.params[0], fields)
}

// Opcode submission.

// intParam reads an integer query parameter (the first value).
func (rq *request) intParam(name string, def int) (int, error) {
	v := rq.query[name]
	if len(v) == 0 {
		return def, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil {
		return 0, errf(http.StatusBadRequest, "Invalid value for the '%s' parameter", name)
	}
	return n, nil
}

// staticParams adds the boolean query parameters given to base, under
// their opcode names (dry-run becomes dry_run).
func (rq *request) staticParams(base map[string]any, names ...string) (map[string]any, error) {
	for _, n := range names {
		if _, ok := rq.query[n]; !ok {
			continue
		}
		v, err := rq.intParam(n, 0)
		if err != nil {
			return nil, err
		}
		base[strings.ReplaceAll(n, "-", "_")] = v != 0
	}
	return base, nil
}

// bodyDict returns the body as opcode parameters: all of it, or only the
// keys in keep when keep is non-nil. A missing or null body is no
// parameters; any other non-dict body is an error.
func (rq *request) bodyDict(keep []string) (map[string]any, error) {
	m, isDict := rq.body.(map[string]any)
	if rq.body != nil && !isDict {
		return nil, errf(http.StatusBadRequest, "Invalid body contents, not a dictionary")
	}
	if keep == nil {
		return m, nil
	}
	out := map[string]any{}
	for _, k := range keep {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// submit builds an opcode from static parameters and the body (which may
// not override them), validates it against the opcode table and submits it
// as a one-opcode job, returning the job id.
func (h *Handler) submit(ctx context.Context, rq *request, opID string, static, body map[string]any) (any, error) {
	op, err := h.buildOp(rq, opID, static, body)
	if err != nil {
		return nil, err
	}
	return h.be.SubmitJob(ctx, []any{op})
}

// buildOp merges static parameters and the body into a validated opcode.
func (h *Handler) buildOp(rq *request, opID string, static, body map[string]any) (map[string]any, error) {
	op := map[string]any{"OP_ID": opID}
	var clash []string
	for k, v := range body {
		if _, ok := static[k]; ok || k == "reason" || k == "OP_ID" {
			clash = append(clash, k)
			continue
		}
		op[k] = v
	}
	if len(clash) > 0 {
		sort.Strings(clash)
		return nil, errf(http.StatusBadRequest, "Can't overwrite static parameters %s", strings.Join(clash, ", "))
	}
	for k, v := range static {
		op[k] = v
	}
	op["reason"] = h.reasonTrail(rq)
	raw, err := json.Marshal(op)
	if err != nil {
		return nil, errf(http.StatusBadRequest, "Invalid body parameters: %v", err)
	}
	if _, err := h.ops.Decode(raw); err != nil {
		var e *ecode.Error
		if errors.As(err, &e) {
			return nil, errf(http.StatusBadRequest, "Invalid body parameters: %s", e.Msg)
		}
		return nil, err
	}
	return op, nil
}

func (h *Handler) reasonTrail(rq *request) []any {
	ts := h.now().UnixNano()
	var trail []any
	if r := rq.query["reason"]; len(r) > 0 {
		trail = append(trail, []any{"gnt:user", r[0], ts})
	}
	return append(trail, []any{"gnt:library:rlib2:" + rq.res, "", ts})
}

// collection is a resource listed by name, or in bulk as dicts of fields,
// with items by name: instances, nodes, groups.
type collection struct {
	fields     []string
	absent     map[string]bool // fields corrald does not compute: sent as null
	idKey      string          // the key of a name in the non-bulk list
	prefix     string          // the items' URI prefix
	query      func(b Backend, ctx context.Context, names, fields []string) ([][]any, error)
	adjust     func(m map[string]any) // every dict
	adjustItem func(m map[string]any) // a single item's dict
}

func (c *collection) dicts(ctx context.Context, be Backend, names []string) ([]map[string]any, error) {
	ask := make([]string, 0, len(c.fields))
	for _, f := range c.fields {
		if !c.absent[f] {
			ask = append(ask, f)
		}
	}
	rows, err := c.query(be, ctx, names, ask)
	if err != nil {
		return nil, err
	}
	out := rowsToDicts(ask, rows)
	for _, m := range out {
		for f := range c.absent {
			m[f] = nil
		}
		if c.adjust != nil {
			c.adjust(m)
		}
	}
	return out, nil
}

// list answers GET on the collection: names and URIs, or with bulk=1 the
// dicts.
func (h *Handler) list(c *collection) handlerFunc {
	return func(ctx context.Context, rq *request) (any, error) {
		bulk, err := rq.intParam("bulk", 0)
		if err != nil {
			return nil, err
		}
		if bulk != 0 {
			return c.dicts(ctx, h.be, nil)
		}
		rows, err := c.query(h.be, ctx, nil, []string{"name"})
		if err != nil {
			return nil, err
		}
		return nameList(rows, c.idKey, c.prefix), nil
	}
}

// item answers GET on one member of the collection.
func (h *Handler) item(c *collection) handlerFunc {
	return func(ctx context.Context, rq *request) (any, error) {
		out, err := c.dicts(ctx, h.be, rq.params[:1])
		if err != nil {
			return nil, notFoundIfNoEnt(err)
		}
		if len(out) == 0 {
			return nil, errNotFound
		}
		if c.adjustItem != nil {
			c.adjustItem(out[0])
		}
		return out[0], nil
	}
}
