package cmdlib

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
)

// coreUnits are the units of the cluster, node and instance life-cycle
// opcodes; the other areas list theirs in their own files.
func (p *Processor) coreUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_TEST_DELAY", func() LU { return &testDelayLU{} }),
		p.unit("OP_CLUSTER_VERIFY", func() LU { return &clusterVerifyLU{} }),
		p.unit("OP_CLUSTER_SET_PARAMS", func() LU { return &clusterSetParamsLU{} }),
		p.unit("OP_CLUSTER_DESTROY", func() LU { return &clusterDestroyLU{} }),
		p.unit("OP_NODE_ADD", func() LU { return &nodeAddLU{} }),
		p.unit("OP_NODE_REMOVE", func() LU { return &nodeRemoveLU{} }),
		p.unit("OP_NODE_SET_PARAMS", func() LU { return &nodeSetParamsLU{} }),
		p.unit("OP_INSTANCE_CREATE", func() LU { return &instanceCreateLU{} }),
		p.unit("OP_INSTANCE_REMOVE", func() LU { return &instanceRemoveLU{} }),
		p.unit("OP_INSTANCE_STARTUP", func() LU { return &instanceStartupLU{} }),
		p.unit("OP_INSTANCE_SHUTDOWN", func() LU { return &instanceShutdownLU{} }),
		p.unit("OP_INSTANCE_REBOOT", func() LU { return &instanceRebootLU{} }),
		p.unit("OP_INSTANCE_REINSTALL", func() LU { return &instanceReinstallLU{} }),
		p.unit("OP_INSTANCE_RENAME", func() LU { return &instanceRenameLU{} }),
		p.unit("OP_INSTANCE_SET_PARAMS", func() LU { return &instanceSetParamsLU{} }),
		p.unit("OP_INSTANCE_QUERY_DATA", func() LU { return &instanceQueryDataLU{} }),
	}
}

// Lock request helpers.
func bgl(mode locking.Mode) locking.Request {
	return locking.Request{Level: locking.LevelCluster, Names: []string{"BGL"}, Mode: mode}
}

func instLock(mode locking.Mode, names ...string) locking.Request {
	return locking.Request{Level: locking.LevelInstance, Names: names, Mode: mode}
}

func nodeLock(mode locking.Mode, uuids ...string) locking.Request {
	return locking.Request{Level: locking.LevelNode, Names: uuids, Mode: mode}
}

func nodeResLock(mode locking.Mode, uuids ...string) locking.Request {
	return locking.Request{Level: locking.LevelNodeRes, Names: uuids, Mode: mode}
}

// Spec builds what a node needs to know about an instance, with every
// parameter filled from the cluster defaults.
func (p *Processor) Spec(inst *config.Instance) nodeapi.InstanceSpec {
	c := p.Cfg.Cluster()
	hv := config.InstanceHVParams(c, inst)
	be := config.Fill(c.BEParams, inst.BEParams)
	osp := config.InstanceOSParams(c, inst)
	s := nodeapi.InstanceSpec{
		Name: inst.Name, UUID: inst.UUID, OS: inst.OS, Hypervisor: inst.Hypervisor,
		PrimaryNodeUUID: inst.PrimaryNode, CTime: inst.CTime, MTime: inst.MTime,
		HVParams: hv.Strings(), BEParams: be.Strings(), OSParams: osp.Strings(),
		OSParamsPrivate: config.InstancePrivateOSParams(c, inst.OS, inst.OSParamsPriv).Strings(),
		MemoryMiB:       config.MemoryMiB(be), VCPUs: config.VCPUs(be), DiskTemplate: inst.DiskTemplate,
		UIDPool: c.UIDPool, SharedFileDir: c.SharedFileStorageDir, NetworkPort: inst.NetworkPort,
	}
	for i, d := range inst.Disks {
		s.Disks = append(s.Disks, nodeapi.DiskSpec{UUID: d.UUID, Name: d.Name, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: p.nodeDiskParams(inst.DiskTemplate, inst.PrimaryNode)})
	}
	for _, n := range inst.NICs {
		nic := nodeapi.NICSpec{UUID: n.UUID, Name: n.Name, MAC: n.MAC, IP: n.IP, Mode: n.Mode, Link: n.Link}
		if net, ok := p.Cfg.Network(n.Network); ok && n.Network != "" {
			nic.Network = &nodeapi.NetworkInfo{Name: net.Name, UUID: net.UUID, Tags: net.Tags, Subnet: net.Network,
				Gateway: net.Gateway, Subnet6: net.Network6, Gateway6: net.Gateway6, MACPrefix: net.MACPrefix}
		}
		s.NICs = append(s.NICs, nic)
	}
	return s
}

func osBase(os string) string {
	for i := 0; i < len(os); i++ {
		if os[i] == '+' {
			return os[:i]
		}
	}
	return os
}

// checkNodeOnline refuses offline nodes, as Ganeti's CheckNodeOnline.
func checkNodeOnline(n *config.Node) error {
	if n.Offline {
		return ecode.Errorf(ecode.State, "Can't use offline node %s", n.Name)
	}
	return nil
}

func checkNodeVMCapable(n *config.Node) error {
	if !n.VMCapable {
		return ecode.Errorf(ecode.State, "Node %s is not vm capable", n.Name)
	}
	return nil
}

// nodeFacts asks a node for its resources.
func (p *Processor) nodeFacts(ctx context.Context, n *config.Node, hv, template string) (*nodeapi.NodeInfoReply, error) {
	var r nodeapi.NodeInfoReply
	if err := p.RPC.Call(ctx, n, nodeapi.NodeInfo, "", nodeapi.NodeInfoArgs{Hypervisor: hv, Template: template}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// reserved sums the memory and disk the configuration already promises on
// a node (every instance whose primary it is).
func (p *Processor) reserved(nodeUUID string, exclude string) (memMiB, diskMiB int64) {
	c := p.Cfg.Cluster()
	p.Cfg.VisitInstances(func(i *config.Instance) bool {
		if i.PrimaryNode != nodeUUID || i.UUID == exclude {
			return true
		}
		mem := config.MemoryMiB(c.BEParams)
		if v, ok := i.BEParams["maxmem"]; ok {
			mem = int64(config.ParamInt(v, int(mem)))
		}
		memMiB += mem
		for _, d := range i.Disks {
			diskMiB += d.SizeMiB
		}
		return true
	})
	return
}

type candidate struct {
	node    *config.Node
	memFree int64
	rank    int // 0 in a preferred group, 1 in a last_resort one
}

// need is what an instance asks of its primary node.
type need struct {
	hv, template    string
	memMiB, diskMiB int64
	vcpus           int            // checked against the node's CPUs and vcpu-ratio; 0: not checked
	spindles        int            // checked against the node's spindles and spindle-ratio; 0: not checked
	spec            *instanceSpecs // checked against the node's group ipolicy; nil: not checked
	group           string         // node group uuid the node must be in; "": any
}

// allocate picks the vm_capable, online, undrained node that fits the
// instance, in a group whose alloc_policy allows it: one in a preferred
// group before one in a last_resort group, then the one with the most
// free memory; never one in an unallocable group (Ganeti's hail does the
// same; this is the built-in allocator).
func (p *Processor) allocate(ctx context.Context, nd need) (*config.Node, error) {
	var cands []candidate
	var reasons []string
	for _, n := range p.Cfg.Nodes() {
		if n.Offline || n.Drained || !n.VMCapable || (nd.group != "" && n.Group != nd.group) {
			continue
		}
		rank := 0
		if g, ok := p.Cfg.Group(n.Group); ok {
			switch g.AllocPolicy {
			case "unallocable":
				reasons = append(reasons, fmt.Sprintf("%s: node group %s is unallocable", n.Name, g.Name))
				continue
			case "last_resort":
				rank = 1
			}
		}
		pol := p.nodePolicy(n)
		if nd.spec != nil {
			if err := pol.check(nd.spec); err != nil {
				reasons = append(reasons, fmt.Sprintf("%s: %v", n.Name, err))
				continue
			}
		}
		f, err := p.nodeFacts(ctx, n, nd.hv, nd.template)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		memFree, err := p.checkFacts(n, f, pol, nd, "")
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		cands = append(cands, candidate{n, memFree, rank})
	}
	if len(cands) == 0 {
		sort.Strings(reasons)
		return nil, ecode.Errorf(ecode.NoRes, "Can't find a node with room for the instance: %v", reasons)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].rank != cands[j].rank {
			return cands[i].rank < cands[j].rank
		}
		return cands[i].memFree > cands[j].memFree
	})
	return cands[0].node, nil
}

// checkNodeRoom verifies a chosen node can hold the instance: its group's
// instance policy, then its memory, disk and CPUs (exclude is an instance
// whose reservation the need replaces).
func (p *Processor) checkNodeRoom(ctx context.Context, n *config.Node, nd need, exclude string) error {
	pol := p.nodePolicy(n)
	if nd.spec != nil {
		if err := pol.check(nd.spec); err != nil {
			return err
		}
	}
	f, err := p.nodeFacts(ctx, n, nd.hv, nd.template)
	if err != nil {
		return err
	}
	_, err = p.checkFacts(n, f, pol, nd, exclude)
	return err
}

// checkFacts compares a node's facts, less what the configuration already
// promises on it, with the need; it returns the free memory.
func (p *Processor) checkFacts(n *config.Node, f *nodeapi.NodeInfoReply, pol instancePolicy, nd need, exclude string) (int64, error) {
	rm, rd := p.reserved(n.UUID, exclude)
	memFree := f.MemoryTotalMiB - f.MemoryNodeMiB - rm
	if memFree < nd.memMiB {
		return 0, ecode.Errorf(ecode.NoRes, "Not enough memory on node %s: %d MiB free, %d MiB needed", n.Name, memFree, nd.memMiB)
	}
	diskFree := f.DiskTotalMiB - rd
	if f.DiskFreeMiB < diskFree {
		diskFree = f.DiskFreeMiB
	}
	if nd.diskMiB > 0 && diskFree < nd.diskMiB {
		return 0, ecode.Errorf(ecode.NoRes, "Not enough disk space on node %s: %d MiB free, %d MiB needed", n.Name, diskFree, nd.diskMiB)
	}
	// The ratios bound what one instance may ask of the node; the sums
	// over a node's instances are left to the allocators' documents (see
	// internal/iallocator), so dense development clusters keep working.
	if nd.vcpus > 0 {
		if err := pol.checkVCPUs(n, f.CPUs, nd.vcpus); err != nil {
			return 0, err
		}
	}
	if nd.spindles > 0 {
		g, _ := p.Cfg.Group(n.Group)
		count := config.ParamInt(NodeNDParams(p.Cfg.Cluster(), g, n)["spindle_count"], 1)
		if err := pol.checkSpindles(n, count, nd.spindles); err != nil {
			return 0, err
		}
	}
	return memFree, nil
}

func contains(l []string, s string) bool { return slices.Contains(l, s) }
