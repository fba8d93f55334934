package rapi

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// fakeBackend answers LUXI calls from fixed rows; unknown names are NoEnt
// errors as corrald gives them, and submitted jobs are recorded.
type fakeBackend struct {
	mu        sync.Mutex
	instances map[string]map[string]any // name -> field -> value
	nodes     map[string]map[string]any
	groups    map[string]map[string]any
	networks  map[string]map[string]any
	jobs      map[int64]map[string]any
	submitted [][]any
	nextJob   int64
	submitErr error
	down      bool
	filters   map[string]map[string]any // job filter rules by uuid (filters_test.go)
}

func newFakeBackend() *fakeBackend {
	inst := map[string]any{
		"name": "web1", "admin_state": "up", "os": "debootstrap+default", "pnode": "node1",
		"snodes": []any{}, "disk_template": "file", "nic.ips": []any{nil}, "nic.macs": []any{"aa:00:00:00:00:01"},
		"nic.modes": []any{"bridged"}, "nic.uuids": []any{"u-nic"}, "nic.names": []any{nil},
		"nic.links": []any{"br0"}, "nic.networks": []any{nil}, "nic.networks.names": []any{nil},
		"nic.bridges": []any{"br0"}, "network_port": nil, "disk.sizes": []any{1024.0}, "disk.spindles": []any{nil},
		"disk_usage": 1024.0, "disk.uuids": []any{"u-disk"}, "disk.names": []any{nil},
		"beparams": map[string]any{"maxmem": 128.0, "minmem": 128.0, "vcpus": 1.0}, "hvparams": map[string]any{},
		"oper_state": true, "oper_ram": 128.0, "oper_vcpus": 1.0, "status": "running",
		"custom_hvparams": map[string]any{}, "custom_beparams": map[string]any{}, "custom_nicparams": []any{map[string]any{}},
		"custom_osparams": map[string]any{}, "ctime": 1.5, "mtime": 2.5, "uuid": "u-web1", "serial_no": 3.0, "tags": []any{},
	}
	node := map[string]any{
		"name": "node1", "offline": false, "master_candidate": true, "drained": false, "dtotal": 1000.0,
		"dfree": 500.0, "mtotal": 4096.0, "mnode": 300.0, "mfree": 2048.0, "pinst_cnt": 1.0, "sinst_cnt": 0.0,
		"ctotal": 2.0, "pip": "192.0.2.1", "sip": "192.0.2.1", "role": "M", "pinst_list": []any{"web1"},
		"sinst_list": []any{}, "master_capable": true, "vm_capable": true, "ndparams": map[string]any{},
		"group.uuid": "u-group", "ctime": 1.0, "mtime": 1.0, "uuid": "u-node1", "serial_no": 1.0, "tags": []any{},
	}
	job := map[string]any{
		"id": 7.0, "ops": []any{map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1"}},
		"status": "success", "summary": []any{"INSTANCE_STARTUP(web1)"}, "opstatus": []any{"success"},
		"received_ts": []any{1.0, 2.0}, "start_ts": []any{1.0, 3.0}, "end_ts": []any{1.0, 4.0},
		"oplog": []any{[]any{}}, "opresult": []any{nil},
	}
	return &fakeBackend{
		instances: map[string]map[string]any{"web1": inst},
		nodes:     map[string]map[string]any{"node1": node},
		networks: map[string]map[string]any{"net1": {"name": "net1", "network": "192.0.2.0/29", "gateway": "192.0.2.1",
			"network6": nil, "gateway6": nil, "mac_prefix": nil, "free_count": 5.0, "reserved_count": 3.0, "map": "XX.....X",
			"group_list": []any{[]any{"default", "bridged", "br0", ""}}, "inst_list": []any{},
			"external_reservations": "192.0.2.0, 192.0.2.1, 192.0.2.7", "ctime": 1.0, "mtime": 1.0, "uuid": "u-net1",
			"serial_no": 1.0, "tags": []any{}}},
		groups: map[string]map[string]any{"default": {
			"alloc_policy": "preferred", "name": "default", "node_cnt": 1.0, "node_list": []any{"node1"},
			"ipolicy": map[string]any{}, "diskparams": map[string]any{}, "ndparams": map[string]any{},
			"custom_ndparams": map[string]any{}, "custom_ipolicy": map[string]any{}, "custom_diskparams": map[string]any{}, "ctime": 1.0, "mtime": 1.0, "uuid": "u-group", "serial_no": 1.0, "tags": []any{},
		}},
		jobs:    map[int64]map[string]any{7: job},
		nextJob: 100,
	}
}

func (f *fakeBackend) check() error {
	if f.down {
		return &backendDownError{Err: fmt.Errorf("dial unix /nonexistent: connect: no such file")}
	}
	return nil
}

func rows(items map[string]map[string]any, kind string, names, fields []string) ([][]any, error) {
	if len(names) == 0 {
		for n := range items {
			names = append(names, n)
		}
	}
	var out [][]any
	for _, n := range names {
		item, ok := items[n]
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "%s '%s' not known", kind, n)
		}
		row := make([]any, len(fields))
		for i, fl := range fields {
			v, ok := item[fl]
			if !ok {
				return nil, ecode.Errorf(ecode.Inval, "Unknown field '%s'", fl)
			}
			row[i] = v
		}
		out = append(out, row)
	}
	return out, nil
}

func (f *fakeBackend) QueryClusterInfo(context.Context) (map[string]any, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	info := map[string]any{"software_version": "x", "enabled_disk_templates": []any{"file", "diskless"}}
	for _, k := range infoKeys {
		if _, ok := info[k]; !ok {
			info[k] = "v"
		}
	}
	return info, nil
}

func (f *fakeBackend) QueryInstances(_ context.Context, names, fields []string) ([][]any, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return rows(f.instances, "Instance", names, fields)
}

func (f *fakeBackend) QueryNodes(_ context.Context, names, fields []string) ([][]any, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return rows(f.nodes, "Node", names, fields)
}

func (f *fakeBackend) QueryGroups(_ context.Context, names, fields []string) ([][]any, error) {
	return rows(f.groups, "Group", names, fields)
}

func (f *fakeBackend) QueryJobs(_ context.Context, ids []int64, fields []string) ([][]any, error) {
	if len(ids) == 0 {
		for id := range f.jobs {
			ids = append(ids, id)
		}
	}
	var out [][]any
	for _, id := range ids {
		j, ok := f.jobs[id]
		if !ok {
			out = append(out, nil) // corrald's answer for an unknown id
			continue
		}
		row := make([]any, len(fields))
		for i, fl := range fields {
			row[i] = j[fl]
		}
		out = append(out, row)
	}
	return out, nil
}

func (f *fakeBackend) QueryTags(_ context.Context, kind, name string) ([]string, error) {
	if kind == "instance" && f.instances[name] == nil {
		return nil, ecode.Errorf(ecode.NoEnt, "Instance '%s' not known", name)
	}
	return []string{"a:" + kind}, nil
}

func (f *fakeBackend) Query(_ context.Context, what string, fields []string, filter any) (*luxi.QueryResult, error) {
	var objs []map[string]any
	switch what {
	case "instance":
		objs = []map[string]any{f.instances["web1"]}
	case "job":
		for _, id := range slices.Sorted(maps.Keys(f.jobs)) {
			objs = append(objs, f.jobs[id])
		}
	case "network":
		// A name filter (["|", ["=", "name", n], ...]) picks networks.
		for _, name := range slices.Sorted(maps.Keys(f.networks)) {
			if filter == nil || strings.Contains(fmt.Sprint(filter), "[= name "+name+"]") {
				objs = append(objs, f.networks[name])
			}
		}
	default:
		return nil, ecode.Errorf(ecode.Inval, "Unknown resource '%s'", what)
	}
	res := &luxi.QueryResult{}
	for _, fl := range fields {
		res.Fields = append(res.Fields, luxi.FieldDef{Name: fl, Title: fl, Kind: "text", Doc: fmt.Sprint(filter)})
	}
	for _, o := range objs {
		row := make([][2]any, len(fields))
		for i, fl := range fields {
			row[i] = [2]any{0.0, o[fl]}
		}
		res.Data = append(res.Data, row)
	}
	return res, nil
}

func (f *fakeBackend) QueryFields(_ context.Context, what string, fields []string) (*luxi.QueryFieldsResult, error) {
	if len(fields) == 0 {
		fields = []string{"name", "status"}
	}
	res := &luxi.QueryFieldsResult{}
	for _, fl := range fields {
		res.Fields = append(res.Fields, luxi.FieldDef{Name: fl, Title: what, Kind: "text", Doc: "d"})
	}
	return res, nil
}

func (f *fakeBackend) SubmitJob(_ context.Context, ops []any) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.submitErr != nil {
		return 0, f.submitErr
	}
	f.submitted = append(f.submitted, ops)
	f.nextJob++
	return f.nextJob, nil
}

func (f *fakeBackend) CancelJob(_ context.Context, id int64) (bool, string, error) {
	if _, ok := f.jobs[id]; !ok {
		return false, "", ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job %d not found", id))
	}
	return true, "Job 7 canceled", nil
}

func (f *fakeBackend) WaitForJobChange(_ context.Context, id int64, fields []string, prev []any, _ *int64, _ int) (*luxi.JobChange, error) {
	j, ok := f.jobs[id]
	if !ok {
		return nil, ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job with id %d lost", id))
	}
	info := make([]any, len(fields))
	for i, fl := range fields {
		info[i] = j[fl]
	}
	if fmt.Sprint(prev) == fmt.Sprint(info) {
		return &luxi.JobChange{NoChange: true}, nil
	}
	return &luxi.JobChange{JobInfo: info}, nil
}

func (f *fakeBackend) lastOp() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.submitted) == 0 {
		return nil
	}
	ops := f.submitted[len(f.submitted)-1]
	return ops[0].(map[string]any)
}

// QueryMetrics answers with fakeMetrics (metrics_test.go).
func (f *fakeBackend) QueryMetrics(context.Context) (string, error) {
	if err := f.check(); err != nil {
		return "", err
	}
	return fakeMetrics, nil
}
