package cmdlib

import (
	"context"
	"fmt"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// OP_INSTANCE_QUERY_DATA (RAPI /2/instances/NAME/info, gnt-instance info):
// per instance the keys and shapes of Ganeti 3.0's LUInstanceQueryData, so
// Ganeti's clients and Corral's move tool read it unchanged.

type instanceQueryDataLU struct {
	Out map[string]any `json:"out"`
}

func (lu *instanceQueryDataLU) Locks(p *Processor, op *opcodes.Op) []locking.Request { return nil }

func (lu *instanceQueryDataLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	names := op.Strings("instances")
	var insts []*config.Instance
	if len(names) == 0 {
		insts = p.Cfg.Instances()
	}
	for _, n := range names {
		i, err := p.Cfg.MustInstance(n)
		if err != nil {
			return err
		}
		insts = append(insts, i)
	}
	lu.Out = map[string]any{}
	for _, inst := range insts {
		lu.Out[inst.Name] = p.instanceData(ctx, inst, op.Bool("static"))
	}
	return nil
}

func (lu *instanceQueryDataLU) Steps() []Step { return nil }
func (lu *instanceQueryDataLU) Result() any   { return lu.Out }

// instanceData is one instance's entry. static skips asking the primary
// node whether the instance runs (run_state is then null, as in Ganeti).
func (p *Processor) instanceData(ctx context.Context, inst *config.Instance, static bool) map[string]any {
	c := p.Cfg.Cluster()
	node, _ := p.Cfg.Node(inst.PrimaryNode)
	var runState, confinement any
	if !static && node != nil && !node.Offline {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ri, err := p.runningInfo(rctx, inst, node)
		cancel()
		if err == nil {
			runState = instanceRunState(inst, ri != nil)
			confinement = confinementInfo(ri)
		}
	}
	var pname, pgroup, pgroupName any
	if node != nil {
		pname, pgroup = node.Name, node.Group
		if g, ok := p.Cfg.Group(node.Group); ok {
			pgroupName = g.Name
		}
	}
	var networkPort any
	if inst.NetworkPort != 0 {
		networkPort = inst.NetworkPort
	}
	out := map[string]any{
		"name": inst.Name, "config_state": inst.AdminState, "run_state": runState,
		"pnode": pname, "pnode_group_uuid": pgroup, "pnode_group_name": pgroupName,
		"snodes": []string{}, "snodes_group_uuids": []string{}, "snodes_group_names": []string{},
		"os": inst.OS, "uuid": inst.UUID, "hypervisor": inst.Hypervisor, "network_port": networkPort,
		"hv_instance": paramsOrEmpty(inst.HVParams), "hv_actual": config.InstanceHVParams(c, inst),
		"be_instance": paramsOrEmpty(inst.BEParams), "be_actual": config.Fill(c.BEParams, inst.BEParams),
		"os_instance": paramsOrEmpty(inst.OSParams), "os_actual": publicOSParams(c, inst),
		"disk_template": inst.DiskTemplate, "disks": instanceDisksData(inst), "nics": instanceNICsData(c, inst, p.Cfg.Network),
		"ctime": inst.CTime, "mtime": inst.MTime, "serial_no": inst.Serial, "tags": nonNilStrings(inst.Tags),
	}
	if confinement != nil {
		out["confinement"] = confinement
	}
	// Corral's own addition, only for an instance that has a status (the
	// watcher acted on it): what was observed, apart from its configuration.
	if st := p.Cfg.InstanceStatus(inst.UUID); st != nil {
		out["status"] = st
	}
	return out
}

// instanceRunState is Ganeti's run_state: "up" when the primary node runs
// the instance, otherwise "offline" for an instance marked offline and
// "down" for the rest.
func instanceRunState(inst *config.Instance, running bool) string {
	switch {
	case running:
		return "up"
	case inst.AdminState == config.AdminOffline:
		return "offline"
	}
	return "down"
}

// instanceDisksData are the disks as Ganeti's disk status dicts. Corral's
// disks have no children, DRBD peers or spindles; their device path and
// status are the node's business and not reported (logical_id, pstatus
// and sstatus are null, as Ganeti reports a disk it cannot look at).
func instanceDisksData(inst *config.Instance) []any {
	out := make([]any, 0, len(inst.Disks))
	for i, d := range inst.Disks {
		out = append(out, map[string]any{
			"iv_name": fmt.Sprintf("disk/%d", i), "dev_type": inst.DiskTemplate, "logical_id": nil,
			"drbd_info": nil, "pstatus": nil, "sstatus": nil, "children": []any{},
			"mode": d.Mode, "size": d.SizeMiB, "spindles": nil, "name": nilIfEmpty(d.Name), "uuid": d.UUID,
		})
	}
	return out
}

// instanceNICsData are the NICs as Ganeti's 9-item tuples [name, uuid, ip,
// mac, mode, link, vlan, network, network info] with the NIC parameters
// filled from the cluster's; for a NIC on a network, its uuid and the
// network object as Ganeti's Network.ToDict gives it.
func instanceNICsData(c *config.Cluster, inst *config.Instance, network func(string) (*config.Network, bool)) []any {
	out := make([]any, 0, len(inst.NICs))
	for _, n := range inst.NICs {
		own := config.Params{}
		if n.Mode != "" {
			own["mode"] = n.Mode
		}
		if n.Link != "" {
			own["link"] = n.Link
		}
		filled := config.Fill(c.NICParams, own)
		vlan, _ := filled["vlan"].(string)
		var netUUID, netInfo any
		if n.Network != "" {
			netUUID, vlan = n.Network, n.VLAN
			if net, ok := network(n.Network); ok {
				netInfo = net
			}
		}
		out = append(out, []any{nilIfEmpty(n.Name), n.UUID, nilIfEmpty(n.IP), n.MAC,
			filled["mode"], filled["link"], vlan, netUUID, netInfo})
	}
	return out
}

func paramsOrEmpty(p config.Params) config.Params {
	if p == nil {
		return config.Params{}
	}
	return p
}
