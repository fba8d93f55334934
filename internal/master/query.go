package master

import (
	"context"
	"sync"
	"time"

	"github.com/corral/corral/internal/cmdlib"
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
	groups := map[string]*config.NodeGroup{}
	for _, g := range d.cfg.Groups() {
		groups[g.UUID] = g
	}
	netNames := map[string]string{}
	for _, n := range d.cfg.Networks() {
		netNames[n.UUID] = n.Name
	}
	rows := make([]*query.InstanceRow, 0, len(insts))
	for _, i := range insts {
		r := &query.InstanceRow{Inst: i, Cluster: c, LiveState: query.RSNoData, NetworkNames: netNames}
		if st := d.cfg.InstanceStatus(i.UUID); cmdlib.InRescue(st) {
			r.RescueState = st.State
		}
		if n, ok := nodes[i.PrimaryNode]; ok {
			r.PNode, r.PGroup = n, groups[n.Group]
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
		r := &query.NodeRow{Node: n, Master: c.MasterNode, Group: g, NDParams: cmdlib.NodeNDParams(c, g, n),
			Primary: prim[n.UUID], LiveState: query.RSNoData, Status: d.cfg.NodeStatus(n.UUID)}
		if name, _ := r.NDParams[cmdlib.NDMachine].(string); name != "" {
			if m, ok := d.cfg.Machine(name); ok {
				r.MachinePower = m.PowerState
			}
		}
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
	insts := map[string][]string{}
	for _, i := range d.cfg.Instances() {
		insts[nodeGroup[i.PrimaryNode]] = append(insts[nodeGroup[i.PrimaryNode]], i.Name)
	}
	c := d.cfg.Cluster()
	clusterND := cmdlib.ClusterNDParams(c)
	rows := make([]*query.GroupRow, 0, len(groups))
	for _, g := range groups {
		rows = append(rows, &query.GroupRow{Group: g, Nodes: members[g.UUID], Instances: insts[g.UUID],
			NDParams: config.Fill(clusterND, g.NDParams), IPolicy: cmdlib.GroupIPolicy(c, g.IPolicy),
			DiskParams: cmdlib.GroupDiskParams(g.DiskParams)})
	}
	return rows, nil
}
