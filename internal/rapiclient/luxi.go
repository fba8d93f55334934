package rapiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// Call answers a LUXI call through RAPI requests, with the result a LUXI
// server would send, so that luxi.NewCallClient(c.Call, c.Close) is a
// *luxi.Client for a remote cluster. Methods RAPI has no resource for fail
// with an error saying to run the command on the master.
func (c *Client) Call(ctx context.Context, method string, args []any) (json.RawMessage, error) {
	a, err := rawArgs(args)
	if err != nil {
		return nil, err
	}
	switch method {
	case luxi.MethodQueryClusterInfo:
		return c.do(ctx, http.MethodGet, "/2/info", nil, nil)
	case luxi.MethodQuery:
		var what string
		var fields []string
		var filter any
		if err := a.get(method, &what, &fields, &filter); err != nil {
			return nil, err
		}
		return c.do(ctx, http.MethodPut, "/2/query/"+url.PathEscape(what), nil, map[string]any{"fields": nonNil(fields), "qfilter": filter})
	case luxi.MethodQueryFields:
		var what string
		var fields []string
		if err := a.get(method, &what, &fields); err != nil {
			return nil, err
		}
		var q url.Values
		if len(fields) > 0 {
			q = url.Values{"fields": {strings.Join(fields, ",")}}
		}
		return c.do(ctx, http.MethodGet, "/2/query/"+url.PathEscape(what)+"/fields", q, nil)
	case luxi.MethodQueryInstances, luxi.MethodQueryNodes, luxi.MethodQueryGroups, luxi.MethodQueryNetworks:
		var names, fields []string
		if err := a.get(method, &names, &fields); err != nil {
			return nil, err
		}
		return c.classicQuery(ctx, classicResource[method], names, fields)
	case luxi.MethodQueryJobs:
		var ids []int64
		var fields []string
		if err := a.get(method, &ids, &fields); err != nil {
			return nil, err
		}
		return c.queryJobs(ctx, ids, fields)
	case luxi.MethodWaitForJobChange:
		return c.waitForJobChange(ctx, a)
	case luxi.MethodCancelJob:
		var id int64
		var kill bool
		if err := a.get(method, &id, &kill); err != nil {
			return nil, err
		}
		if kill {
			return nil, notOverRAPI("killing a job (cancel --kill)")
		}
		return c.do(ctx, http.MethodDelete, "/2/jobs/"+strconv.FormatInt(id, 10), nil, nil)
	case luxi.MethodQueryTags:
		var kind, name string
		if err := a.get(method, &kind, &name); err != nil {
			return nil, err
		}
		path, err := tagsPath(kind, name)
		if err != nil {
			return nil, err
		}
		return c.do(ctx, http.MethodGet, path, nil, nil)
	case luxi.MethodQueryConfigValues:
		return c.configValues(ctx, a)
	case luxi.MethodSubmitJob:
		var ops []map[string]any
		if err := a.get(method, &ops); err != nil {
			return nil, err
		}
		req, err := SubmitRequest(ops)
		if err != nil {
			return nil, err
		}
		return c.do(ctx, req.Method, req.Path, req.Query, req.Body)
	}
	if raw, ok, err := c.filterCall(ctx, method, a); ok {
		return raw, err
	}
	return nil, notOverRAPI("the " + method + " call")
}

// notOverRAPI is the error for what only the master's LUXI socket offers.
func notOverRAPI(what string) *ecode.Error {
	return ecode.Errorf(ecode.Environ, "%s is not available over RAPI; run it on the master", what)
}

// args are a call's positional arguments as JSON, so each can be decoded
// into the type the translation needs whatever Go type the caller used.
type args []json.RawMessage

func rawArgs(in []any) (args, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("rapiclient: encoding call arguments: %w", err)
	}
	var out args
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("rapiclient: encoding call arguments: %w", err)
	}
	return out, nil
}

// get decodes the first len(dst) arguments; missing ones leave dst as is.
func (a args) get(method string, dst ...any) error {
	for i, d := range dst {
		if i >= len(a) {
			break
		}
		if err := json.Unmarshal(a[i], d); err != nil {
			return ecode.New(ecode.LuxiError, ecode.Inval, fmt.Sprintf("%s: argument %d: %v", method, i, err))
		}
	}
	return nil
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// classicResource is the query resource behind each classic query call.
var classicResource = map[string]string{
	luxi.MethodQueryInstances: "instance",
	luxi.MethodQueryNodes:     "node",
	luxi.MethodQueryGroups:    "group",
	luxi.MethodQueryNetworks:  "network",
}

// queryAnswer is /2/query's answer, cells kept raw until picked.
type queryAnswer struct {
	Fields []struct {
		Name string `json:"name"`
	} `json:"fields"`
	Data [][][2]json.RawMessage `json:"data"`
}

// classicQuery answers a classic query with /2/query and a name filter:
// rows in the order of names (every item, by name, when names is empty),
// unavailable values as null, and an unknown name as an error, as the LUXI
// calls do.
func (c *Client) classicQuery(ctx context.Context, what string, names, fields []string) (json.RawMessage, error) {
	ask := append(slices.Clone(fields), "name")
	var filter any
	if len(names) > 0 {
		f := []any{"|"}
		for _, n := range names {
			f = append(f, []any{"=", "name", n})
		}
		filter = f
	}
	raw, err := c.do(ctx, http.MethodPut, "/2/query/"+what, nil, map[string]any{"fields": ask, "qfilter": filter})
	if err != nil {
		return nil, err
	}
	var ans queryAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("decoding the %s query answer: %v", what, err))
	}
	byName := map[string][]json.RawMessage{}
	var order []string
	for _, row := range ans.Data {
		if len(row) != len(ask) {
			return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("%s query: a row of %d values for %d fields", what, len(row), len(ask)))
		}
		vals := make([]json.RawMessage, len(fields))
		for i := range fields {
			vals[i] = cellValue(row[i])
		}
		var name string
		_ = json.Unmarshal(cellValue(row[len(fields)]), &name)
		byName[name] = vals
		order = append(order, name)
	}
	if len(names) > 0 {
		order = nil
		for _, n := range names {
			if _, ok := byName[n]; !ok {
				return nil, ecode.Errorf(ecode.NoEnt, "%s '%s' not known", strings.ToUpper(what[:1])+what[1:], n)
			}
			order = append(order, n)
		}
	} else {
		slices.Sort(order)
	}
	rows := make([][]json.RawMessage, 0, len(order))
	for _, n := range order {
		rows = append(rows, byName[n])
	}
	return json.Marshal(rows)
}

// cellValue is a [status, value] cell's value, null unless the status is
// normal (0).
func cellValue(cell [2]json.RawMessage) json.RawMessage {
	if strings.TrimSpace(string(cell[0])) != "0" || len(cell[1]) == 0 {
		return json.RawMessage("null")
	}
	return cell[1]
}

// jobBulkFields are what GET /2/jobs?bulk=1 answers for every job;
// jobItemFields what GET /2/jobs/[id] answers.
var (
	jobBulkFields = []string{"id", "ops", "status", "summary", "opstatus", "received_ts", "start_ts", "end_ts"}
	jobItemFields = append(slices.Clone(jobBulkFields), "oplog", "opresult")
)

func subset(fields, of []string) bool {
	for _, f := range fields {
		if !slices.Contains(of, f) {
			return false
		}
	}
	return true
}

// queryJobs answers QueryJobs with the resources Ganeti's RAPI has when
// they carry the fields: the bulk job list for every job, one GET
// /2/jobs/[id] per job (how a job being followed is read). Other fields
// come from the job query over every job, keeping the ones asked for.
func (c *Client) queryJobs(ctx context.Context, ids []int64, fields []string) (json.RawMessage, error) {
	rows := make([][]json.RawMessage, 0, len(ids))
	if len(ids) == 0 && subset(fields, jobBulkFields) {
		raw, err := c.do(ctx, http.MethodGet, "/2/jobs", url.Values{"bulk": {"1"}}, nil)
		if err != nil {
			return nil, err
		}
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("decoding the job list: %v", err))
		}
		for _, m := range list {
			rows = append(rows, pick(m, fields))
		}
		return json.Marshal(rows)
	}
	if len(ids) > 0 && len(ids) <= 20 && subset(fields, jobItemFields) {
		for _, id := range ids {
			raw, err := c.do(ctx, http.MethodGet, "/2/jobs/"+strconv.FormatInt(id, 10), nil, nil)
			if ecode.ClassOf(err) == ecode.NoEnt {
				rows = append(rows, nil)
				continue
			}
			if err != nil {
				return nil, err
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("decoding job %d: %v", id, err))
			}
			rows = append(rows, pick(m, fields))
		}
		return json.Marshal(rows)
	}
	ask := append(slices.Clone(fields), "id")
	raw, err := c.do(ctx, http.MethodPut, "/2/query/job", nil, map[string]any{"fields": ask})
	if err != nil {
		return nil, err
	}
	var ans queryAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("decoding the job query answer: %v", err))
	}
	byID := map[int64][]json.RawMessage{}
	var all []int64
	for _, row := range ans.Data {
		if len(row) != len(ask) {
			return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("job query: a row of %d values for %d fields", len(row), len(ask)))
		}
		var id int64
		if json.Unmarshal(cellValue(row[len(fields)]), &id) != nil {
			continue
		}
		vals := make([]json.RawMessage, len(fields))
		for i := range fields {
			vals[i] = cellValue(row[i])
		}
		byID[id] = vals
		all = append(all, id)
	}
	if len(ids) == 0 {
		slices.Sort(all)
		ids = all
	}
	for _, id := range ids {
		rows = append(rows, byID[id]) // nil (null) for an unknown job, as LUXI
	}
	return json.Marshal(rows)
}

// pick is a row of a dict's values, null for absent keys.
func pick(m map[string]json.RawMessage, fields []string) []json.RawMessage {
	row := make([]json.RawMessage, len(fields))
	for i, f := range fields {
		row[i] = m[f]
		if row[i] == nil {
			row[i] = json.RawMessage("null")
		}
	}
	return row
}

// waitForJobChange is PUT /2/jobs/[id]/wait. The server bounds the wait
// itself (a few seconds) and the caller loops, so the LUXI timeout argument
// has no RAPI counterpart.
func (c *Client) waitForJobChange(ctx context.Context, a args) (json.RawMessage, error) {
	var id int64
	var fields []string
	var prev []any
	var serial *int64
	if err := a.get(luxi.MethodWaitForJobChange, &id, &fields, &prev, &serial); err != nil {
		return nil, err
	}
	body := map[string]any{"fields": nonNil(fields), "previous_job_info": prev, "previous_log_serial": serial}
	raw, err := c.do(ctx, http.MethodPut, "/2/jobs/"+strconv.FormatInt(id, 10)+"/wait", nil, body)
	if ecode.ClassOf(err) == ecode.NoEnt {
		return nil, ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job with id %d lost", id))
	}
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(raw)) == "null" {
		return json.RawMessage(`"nochange"`), nil
	}
	var ch struct {
		JobInfo    json.RawMessage `json:"job_info"`
		LogEntries json.RawMessage `json:"log_entries"`
	}
	if err := json.Unmarshal(raw, &ch); err != nil || ch.JobInfo == nil {
		return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("job %d: unexpected wait answer", id))
	}
	if ch.LogEntries == nil {
		ch.LogEntries = json.RawMessage("[]")
	}
	return json.Marshal([]json.RawMessage{ch.JobInfo, ch.LogEntries})
}

// tagsPath is the tags resource of an object.
func tagsPath(kind, name string) (string, error) {
	switch kind {
	case "cluster":
		return "/2/tags", nil
	case "instance":
		return "/2/instances/" + url.PathEscape(name) + "/tags", nil
	case "node":
		return "/2/nodes/" + url.PathEscape(name) + "/tags", nil
	case "nodegroup":
		return "/2/groups/" + url.PathEscape(name) + "/tags", nil
	case "network":
		return "/2/networks/" + url.PathEscape(name) + "/tags", nil
	}
	return "", ecode.Errorf(ecode.Inval, "unknown tag kind %q", kind)
}

// configInfoKeys are the configuration values /2/info carries, by the key
// it uses.
var configInfoKeys = map[string]string{"cluster_name": "name", "master_node": "master"}

// configValues answers QueryConfigValues for the values /2/info carries.
func (c *Client) configValues(ctx context.Context, a args) (json.RawMessage, error) {
	var fields []string
	if err := a.get(luxi.MethodQueryConfigValues, &fields); err != nil {
		return nil, err
	}
	for _, f := range fields {
		if _, ok := configInfoKeys[f]; !ok {
			return nil, notOverRAPI(fmt.Sprintf("the configuration value %q", f))
		}
	}
	raw, err := c.do(ctx, http.MethodGet, "/2/info", nil, nil)
	if err != nil {
		return nil, err
	}
	var info map[string]json.RawMessage
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("decoding /2/info: %v", err))
	}
	out := make([]json.RawMessage, len(fields))
	for i, f := range fields {
		out[i] = info[configInfoKeys[f]]
		if out[i] == nil {
			out[i] = json.RawMessage("null")
		}
	}
	return json.Marshal(out)
}
