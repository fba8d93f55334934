package master

import (
	"context"
	"sync"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/query"
)

// liveTimeout bounds how long a query waits for node facts: a dead node
// makes its fields unavailable, not the query slow.
const liveTimeout = 5 * time.Second

type instanceLive struct {
	state int
	byID  map[string]*nodeapi.RunningInstance
}

// gatherInstances asks every online node which instances it runs.
func (d *Daemon) gatherInstances(ctx context.Context, nodes []*config.Node) map[string]*instanceLive {
	hvs := d.cfg.Cluster().EnabledHypervisors
	out := map[string]*instanceLive{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	for _, n := range nodes {
		if n.Offline || !n.VMCapable {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var list []nodeapi.RunningInstance
			err := d.rpc.Call(ctx, n, nodeapi.InstanceList, "", nodeapi.InstanceListArgs{Hypervisors: hvs}, &list)
			l := &instanceLive{state: query.RSNormal, byID: map[string]*nodeapi.RunningInstance{}}
			if err != nil {
				l.state = query.RSUnavail
			}
			for i := range list {
				l.byID[list[i].UUID] = &list[i]
			}
			mu.Lock()
			out[n.UUID] = l
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (d *Daemon) instanceRows(ctx context.Context, names []string, live bool) ([]*query.InstanceRow, error) {
	var insts []*config.Instance
	if len(names) == 0 {
		insts = d.cfg.Instances()
	}
	for _, n := range names {
		i, err := d.cfg.MustInstance(n)
		if err != nil {
			return nil, err
		}
		insts = append(insts, i)
	}
	c := d.cfg.Cluster()
	var facts map[string]*instanceLive
	if live {
		facts = d.gatherInstances(ctx, d.cfg.Nodes())
	}
	// One copy of each node, not one per instance.
	nodes := map[string]*config.Node{}
	for _, n := range d.cfg.Nodes() {
		nodes[n.UUID] = n
	}
	rows := make([]*query.InstanceRow, 0, len(insts))
	for _, i := range insts {
		r := &query.InstanceRow{Inst: i, Cluster: c, LiveState: query.RSNoData}
		if n, ok := nodes[i.PrimaryNode]; ok {
			r.PNode = n
			if n.Offline {
				r.LiveState = query.RSOffline
			}
		}
		if f, ok := facts[i.PrimaryNode]; ok {
			r.LiveState = f.state
			r.Live = f.byID[i.UUID]
		} else if live && r.LiveState == query.RSNoData {
			r.LiveState = query.RSUnavail
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (d *Daemon) nodeRows(ctx context.Context, names []string, live bool) ([]*query.NodeRow, error) {
	var nodes []*config.Node
	if len(names) == 0 {
		nodes = d.cfg.Nodes()
	}
	for _, n := range names {
		node, err := d.cfg.MustNode(n)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, node)
	}
	c := d.cfg.Cluster()
	prim := map[string][]string{}
	for _, i := range d.cfg.Instances() {
		prim[i.PrimaryNode] = append(prim[i.PrimaryNode], i.Name)
	}
	rows := make([]*query.NodeRow, len(nodes))
	var wg sync.WaitGroup
	lctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	for k, n := range nodes {
		g, _ := d.cfg.Group(n.Group)
		r := &query.NodeRow{Node: n, Master: c.MasterNode, Group: g, Primary: prim[n.UUID], LiveState: query.RSNoData}
		rows[k] = r
		if !live || n.Offline {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var f nodeapi.NodeInfoReply
			if err := d.rpc.Call(lctx, n, nodeapi.NodeInfo, "", nodeapi.NodeInfoArgs{Hypervisor: c.DefaultHypervisor(), Template: config.DTFile}, &f); err != nil {
				r.LiveState = query.RSUnavail
				return
			}
			r.Facts, r.LiveState = &f, query.RSNormal
		}()
	}
	wg.Wait()
	return rows, nil
}

func (d *Daemon) groupRows(names []string) ([]*query.GroupRow, error) {
	var groups []*config.NodeGroup
	if len(names) == 0 {
		groups = d.cfg.Groups()
	}
	for _, n := range names {
		g, ok := d.cfg.Group(n)
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "Node group '%s' not known", n)
		}
		groups = append(groups, g)
	}
	members := map[string][]string{}
	nodeGroup := map[string]string{}
	for _, n := range d.cfg.Nodes() {
		members[n.Group] = append(members[n.Group], n.Name)
		nodeGroup[n.UUID] = n.Group
	}
	insts := map[string]int{}
	for _, i := range d.cfg.Instances() {
		insts[nodeGroup[i.PrimaryNode]]++
	}
	rows := make([]*query.GroupRow, 0, len(groups))
	for _, g := range groups {
		rows = append(rows, &query.GroupRow{Group: g, Nodes: members[g.UUID], Insts: insts[g.UUID]})
	}
	return rows, nil
}

// classicQuery answers QueryInstances/QueryNodes/QueryGroups: rows of plain
// values.
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
		return d.qInst.Values(rows, fields), nil
	case "node":
		if err := d.qNode.Check(fields); err != nil {
			return nil, err
		}
		rows, err := d.nodeRows(ctx, names, d.qNode.NeedsLive(fields))
		if err != nil {
			return nil, err
		}
		return d.qNode.Values(rows, fields), nil
	case "group":
		if err := d.qGroup.Check(fields); err != nil {
			return nil, err
		}
		rows, err := d.groupRows(names)
		if err != nil {
			return nil, err
		}
		return d.qGroup.Values(rows, fields), nil
	}
	return nil, ecode.Errorf(ecode.Inval, "Unknown resource '%s'", what)
}

// queryResult is LUXI Query's answer.
type queryResult struct {
	Fields []query.FieldDef `json:"fields"`
	Data   [][]query.Cell   `json:"data"`
}

func (d *Daemon) query(ctx context.Context, what string, fields []string, filter any) (*queryResult, error) {
	need := append(append([]string{}, fields...), query.FilterFields(filter)...)
	switch what {
	case "instance":
		rows, err := d.instanceRows(ctx, nil, d.qInst.NeedsLive(need))
		if err != nil {
			return nil, err
		}
		if rows, err = query.Filter(d.qInst, rows, filter); err != nil {
			return nil, err
		}
		return &queryResult{d.qInst.Defs(fields), d.qInst.Rows(rows, fields)}, nil
	case "node":
		rows, err := d.nodeRows(ctx, nil, d.qNode.NeedsLive(need))
		if err != nil {
			return nil, err
		}
		if rows, err = query.Filter(d.qNode, rows, filter); err != nil {
			return nil, err
		}
		return &queryResult{d.qNode.Defs(fields), d.qNode.Rows(rows, fields)}, nil
	case "group":
		rows, err := d.groupRows(nil)
		if err != nil {
			return nil, err
		}
		if rows, err = query.Filter(d.qGroup, rows, filter); err != nil {
			return nil, err
		}
		return &queryResult{d.qGroup.Defs(fields), d.qGroup.Rows(rows, fields)}, nil
	case "job":
		if filter != nil {
			return nil, ecode.Errorf(ecode.Inval, "Filters on jobs are not supported; query all jobs or use QueryJobs")
		}
		vals, err := d.queue.Query(ctx, nil, fields)
		if err != nil {
			return nil, err
		}
		redactJobRows(d.proc.Ops, fields, vals)
		res := &queryResult{Fields: jobFieldDefs(fields)}
		for _, row := range vals {
			cells := make([]query.Cell, len(row))
			for i, v := range row {
				cells[i] = query.Cell{query.RSNormal, v}
			}
			res.Data = append(res.Data, cells)
		}
		return res, nil
	}
	return nil, ecode.Errorf(ecode.Inval, "Unknown resource '%s'", what)
}

func jobFieldDefs(fields []string) []query.FieldDef {
	out := make([]query.FieldDef, len(fields))
	for i, f := range fields {
		out[i] = query.FieldDef{Name: f, Title: f, Kind: query.KOther}
	}
	return out
}

func (d *Daemon) queryFields(what string, fields []string) (any, error) {
	switch what {
	case "instance":
		return map[string]any{"fields": d.qInst.Defs(fields)}, nil
	case "node":
		return map[string]any{"fields": d.qNode.Defs(fields)}, nil
	case "group":
		return map[string]any{"fields": d.qGroup.Defs(fields)}, nil
	}
	return nil, ecode.Errorf(ecode.Inval, "Unknown resource '%s'", what)
}
