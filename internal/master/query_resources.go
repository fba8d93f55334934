package master

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/query"
)

// The field declarations of the resources beyond instances, nodes and
// groups (those live on the Daemon); they hold no state.
var (
	qCluster = query.Cluster()
	qOS      = query.OSes()
	qExport  = query.Exports()
	qLock    = query.Locks()
	qNetwork = query.Networks()
	qJob     = query.Jobs()
)

// queryResult is LUXI Query's answer.
type queryResult struct {
	Fields []query.FieldDef `json:"fields"`
	Data   [][]query.Cell   `json:"data"`
}

// answer filters rows and evaluates fields as LUXI Query answers.
func answer[T any](res *query.Resource[T], rows []T, fields []string, filter any) (*queryResult, error) {
	rows, err := query.Filter(res, rows, filter)
	if err != nil {
		return nil, err
	}
	return &queryResult{res.Defs(fields), res.Rows(rows, fields)}, nil
}

// classic evaluates fields as the old-style calls (QueryNetworks,
// QueryExports, ...) answer: plain values.
func classic[T any](res *query.Resource[T], rows []T, fields []string) ([][]any, error) {
	if err := res.Check(fields); err != nil {
		return nil, err
	}
	return res.Values(rows, fields), nil
}

// query answers LUXI Query for every resource Ganeti 3.0 knows.
func (d *Daemon) query(ctx context.Context, what string, fields []string, filter any) (*queryResult, error) {
	need := append(slices.Clone(fields), query.FilterFields(filter)...)
	switch what {
	case "instance":
		rows, err := d.instanceRows(ctx, nil, d.qInst.NeedsLive(need))
		if err != nil {
			return nil, err
		}
		return answer(d.qInst, rows, fields, filter)
	case "node":
		rows, err := d.nodeRows(ctx, nil, d.qNode.NeedsLive(need))
		if err != nil {
			return nil, err
		}
		return answer(d.qNode, rows, fields, filter)
	case "group":
		rows, err := d.groupRows(nil)
		if err != nil {
			return nil, err
		}
		return answer(d.qGroup, rows, fields, filter)
	case "job":
		rows, err := d.jobRows(ctx, need)
		if err != nil {
			return nil, err
		}
		return answer(qJob, rows, fields, filter)
	case "cluster":
		return answer(qCluster, []*query.ClusterRow{d.clusterRow()}, fields, filter)
	case "os":
		return answer(qOS, d.osRows(ctx), fields, filter)
	case "export":
		return answer(qExport, d.exportRows(ctx, nil), fields, filter)
	case "lock":
		return answer(qLock, d.lockRows(), fields, filter)
	case "network":
		rows, err := d.networkRows(nil)
		if err != nil {
			return nil, err
		}
		return answer(qNetwork, rows, fields, filter)
	case "filter":
		// As Ganeti: a filter of uuids only looks each one up.
		uuids, _ := query.RequestedNames(filter, "uuid")
		rows, err := d.filterRows(uuids)
		if err != nil {
			return nil, err
		}
		return answer(qFilter, rows, fields, filter)
	}
	return nil, ecode.Errorf(ecode.Inval, "Unknown resource '%s'", what)
}

// queryFields answers LUXI QueryFields.
func (d *Daemon) queryFields(what string, fields []string) (any, error) {
	var defs []query.FieldDef
	switch what {
	case "instance":
		defs = d.qInst.Defs(fields)
	case "node":
		defs = d.qNode.Defs(fields)
	case "group":
		defs = d.qGroup.Defs(fields)
	case "job":
		defs = qJob.Defs(fields)
	case "cluster":
		defs = qCluster.Defs(fields)
	case "os":
		defs = qOS.Defs(fields)
	case "export":
		defs = qExport.Defs(fields)
	case "lock":
		defs = qLock.Defs(fields)
	case "network":
		defs = qNetwork.Defs(fields)
	case "filter":
		defs = qFilter.Defs(fields)
	default:
		return nil, ecode.Errorf(ecode.Inval, "Unknown resource '%s'", what)
	}
	return map[string]any{"fields": defs}, nil
}

// classicQuery answers QueryInstances, QueryNodes, QueryGroups,
// QueryNetworks and QueryExports: rows of plain values.
func (d *Daemon) classicQuery(ctx context.Context, what string, names, fields []string) ([][]any, error) {
	switch what {
	case "instance":
		if err := d.qInst.Check(fields); err != nil {
			return nil, err
		}
		rows, err := d.instanceRows(ctx, names, d.qInst.NeedsLive(fields))
		if err != nil {
			return nil, err
		}
		return classic(d.qInst, rows, fields)
	case "node":
		if err := d.qNode.Check(fields); err != nil {
			return nil, err
		}
		rows, err := d.nodeRows(ctx, names, d.qNode.NeedsLive(fields))
		if err != nil {
			return nil, err
		}
		return classic(d.qNode, rows, fields)
	case "group":
		rows, err := d.groupRows(names)
		if err != nil {
			return nil, err
		}
		return classic(d.qGroup, rows, fields)
	case "network":
		if err := qNetwork.Check(fields); err != nil {
			return nil, err
		}
		rows, err := d.networkRows(names)
		if err != nil {
			return nil, err
		}
		return classic(qNetwork, rows, fields)
	case "export":
		if _, err := d.namedNodes(names); err != nil {
			return nil, err
		}
		return classic(qExport, d.exportRows(ctx, names), fields)
	}
	return nil, ecode.Errorf(ecode.Inval, "Unknown resource '%s'", what)
}

// networkRows are the named networks (all when names is empty), with
// their pools, connected groups and instances.
func (d *Daemon) networkRows(names []string) ([]*query.NetworkRow, error) {
	nets := d.cfg.Networks()
	if len(names) > 0 {
		nets = nets[:0]
		for _, n := range names {
			net, err := d.cfg.MustNetwork(n)
			if err != nil {
				return nil, err
			}
			nets = append(nets, net)
		}
	}
	return query.NetworkRows(nets, d.cfg.Groups(), d.cfg.Instances()), nil
}

func (d *Daemon) namedNodes(names []string) ([]*config.Node, error) {
	if len(names) == 0 {
		return d.cfg.Nodes(), nil
	}
	out := make([]*config.Node, 0, len(names))
	for _, n := range names {
		node, err := d.cfg.MustNode(n)
		if err != nil {
			return nil, err
		}
		out = append(out, node)
	}
	return out, nil
}

// jobRows are every non-archived job with the job fields among need.
func (d *Daemon) jobRows(ctx context.Context, need []string) ([]query.JobRow, error) {
	known := jobqueue.Fields()
	var fields []string
	for _, f := range need {
		if slices.Contains(known, f) && !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	vals, err := d.queue.Query(ctx, nil, fields)
	if err != nil {
		return nil, err
	}
	redactJobRows(d.engine.Ops(), fields, vals)
	rows := make([]query.JobRow, 0, len(vals))
	for _, v := range vals {
		if v == nil {
			continue // archived or removed since listed
		}
		r := make(query.JobRow, len(fields))
		for i, f := range fields {
			r[f] = v[i]
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// archInfo is QueryClusterInfo's architecture: the word size and machine
// the master runs on, in Python's platform module's words.
func archInfo() []string {
	machine := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "ppc64le": "ppc64le",
		"s390x": "s390x", "riscv64": "riscv64"}[runtime.GOARCH]
	if machine == "" {
		machine = runtime.GOARCH
	}
	return []string{strconv.Itoa(strconv.IntSize) + "bit", machine}
}

func (d *Daemon) clusterRow() *query.ClusterRow {
	c := d.cfg.Cluster()
	master := ""
	if n, ok := d.cfg.Node(c.MasterNode); ok {
		master = n.Name
	}
	return &query.ClusterRow{Cluster: c, MasterName: master, Drained: d.queue.Drained(),
		Now: float64(time.Now().Unix()), Architecture: archInfo(), SoftwareVersion: Version,
		VCSVersion: "corral " + Version, ProtocolVersion: ProtocolVersion, OSAPIVersion: osAPIVersion,
		ExportVersion: exportVersion}
}

// The highest OS API version Corral's OS interface speaks and the export
// format version, as QueryClusterInfo reports them.
const (
	osAPIVersion  = 20
	exportVersion = 0
)

// osRows asks every online vm_capable node for its OS definitions and
// merges them as OP_OS_DIAGNOSE does; a node that cannot answer is left
// out of the merge, as in Ganeti.
func (d *Daemon) osRows(ctx context.Context) []*query.OSRow {
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	perNode := map[string][]nodeapi.OSInfo{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range d.cfg.Nodes() {
		if n.Offline || !n.VMCapable {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l []nodeapi.OSInfo
			if err := d.rpc.Call(ctx, n, nodeapi.OSDiagnose, "", struct{}{}, &l); err != nil {
				return
			}
			mu.Lock()
			perNode[n.Name] = l
			mu.Unlock()
		}()
	}
	wg.Wait()
	c := d.cfg.Cluster()
	statuses := cmdlib.MergeOS(perNode, c)
	var rows []*query.OSRow
	for i := range statuses {
		r := &statuses[i]
		r.OSParams = map[string]config.Params{}
		r.OSHVParams = map[string]map[string]config.Params{}
		for _, v := range r.Variants {
			if p, ok := c.OSParams[r.Name+"+"+v]; ok {
				r.OSParams[r.Name+"+"+v] = p
			}
			if p, ok := c.OSHVParams[r.Name+"+"+v]; ok {
				r.OSHVParams[r.Name+"+"+v] = p
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// exportRows lists the finished exports of the named nodes (all when
// none): a node that is offline or does not answer gives one row with the
// export unavailable.
func (d *Daemon) exportRows(ctx context.Context, names []string) []*query.ExportRow {
	nodes, err := d.namedNodes(names)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	perNode := make([][]*query.ExportRow, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n.Offline {
			perNode[i] = []*query.ExportRow{{Node: n.Name, Status: query.RSOffline}}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r nodeapi.ExportListReply
			if err := d.rpc.Call(ctx, n, nodeapi.ExportList, "", struct{}{}, &r); err != nil {
				perNode[i] = []*query.ExportRow{{Node: n.Name, Status: query.RSNoData}}
				return
			}
			slices.Sort(r.Names)
			for _, e := range r.Names {
				perNode[i] = append(perNode[i], &query.ExportRow{Node: n.Name, Export: e})
			}
		}()
	}
	wg.Wait()
	var rows []*query.ExportRow
	for _, l := range perNode {
		rows = append(rows, l...)
	}
	return rows
}

// lockRows are the locks held or waited for right now.
func (d *Daemon) lockRows() []*locking.LockInfo {
	info := d.locks.Info()
	rows := make([]*locking.LockInfo, len(info))
	for i := range info {
		rows[i] = &info[i]
	}
	return rows
}
