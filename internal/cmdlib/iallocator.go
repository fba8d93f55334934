package cmdlib

import (
	"context"
	"sort"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/iallocator"
)

// allocatorFor resolves an opcode's iallocator parameter: the named
// allocator from the search path, or the cluster's default, or the
// built-in one.
func (p *Processor) allocatorFor(name string) (iallocator.Allocator, error) {
	return iallocator.Resolve(name, p.Cfg.Cluster().DefaultIAllocator, p.IAllocatorSearchPath)
}

// allocatorCluster describes the cluster to an allocator: groups, nodes
// with the resources they report (asked for the hypervisor and disk
// template of the request), and instances. A node that does not answer is
// described without resources, which no allocator places anything on.
func (p *Processor) allocatorCluster(ctx context.Context, hv, template string) *iallocator.Cluster {
	c := p.Cfg.Cluster()
	if hv == "" {
		hv = c.DefaultHypervisor()
	}
	if template == "" && len(c.EnabledDiskTemplates) > 0 {
		template = c.EnabledDiskTemplates[0]
	}
	out := &iallocator.Cluster{Name: c.ClusterName, Tags: c.Tags, EnabledHypervisors: c.EnabledHypervisors, IPolicy: ClusterIPolicy(c)}
	for _, g := range p.Cfg.Groups() {
		pol := g.AllocPolicy
		if pol == "" {
			pol = "preferred" // a group made without one
		}
		out.Groups = append(out.Groups, iallocator.Group{UUID: g.UUID, Name: g.Name, AllocPolicy: pol,
			IPolicy: GroupIPolicy(c, g.IPolicy), Tags: g.Tags})
	}
	names := map[string]string{}
	for _, n := range p.Cfg.Nodes() {
		names[n.UUID] = n.Name
		an := iallocator.Node{Name: n.Name, PrimaryIP: n.PrimaryIP, SecondaryIP: n.SecondaryIP, Group: n.Group, Tags: n.Tags,
			Offline: n.Offline, Drained: n.Drained, MasterCandidate: n.MasterCandidate, MasterCapable: n.MasterCapable,
			VMCapable: n.VMCapable, NDParams: config.Fill(c.NDParams, n.NDParams)}
		if !n.Offline && n.VMCapable {
			if f, err := p.nodeFacts(ctx, n, hv, template); err != nil {
				p.Log.Warn("node left out of the allocator's choices", "node", n.Name, "err", err)
			} else {
				an.Resources = p.nodeResources(n, f.MemoryTotalMiB, f.MemoryNodeMiB, f.DiskTotalMiB, f.DiskFreeMiB, int64(f.CPUs))
			}
		}
		out.Nodes = append(out.Nodes, an)
	}
	p.Cfg.VisitInstances(func(i *config.Instance) bool {
		out.Instances = append(out.Instances, p.allocatorInstance(c, i, names))
		return true
	})
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].Name < out.Nodes[j].Name })
	return out
}

// nodeResources is a node's resources less what the configuration promises
// on it, the way checkFacts counts them.
func (p *Processor) nodeResources(n *config.Node, memTotal, memNode, diskTotal, diskFree, cpus int64) *iallocator.NodeResources {
	rm, rd := p.reserved(n.UUID, "")
	c := p.Cfg.Cluster()
	var up int64
	p.Cfg.VisitInstances(func(i *config.Instance) bool {
		if i.PrimaryNode == n.UUID && i.AdminState == config.AdminUp {
			up += config.MemoryMiB(config.Fill(c.BEParams, i.BEParams))
		}
		return true
	})
	free := min(diskFree, diskTotal-rd)
	return &iallocator.NodeResources{TotalMemory: memTotal, ReservedMemory: memNode, FreeMemory: memTotal - memNode - rm,
		TotalDisk: diskTotal, FreeDisk: max(free, 0), TotalCPUs: cpus, ReservedCPUs: 0, PrimaryMemory: rm, PrimaryUpMemory: up}
}

func (p *Processor) allocatorInstance(c *config.Cluster, i *config.Instance, names map[string]string) iallocator.Instance {
	be := config.Fill(c.BEParams, i.BEParams)
	ai := iallocator.Instance{Name: i.Name, Tags: i.Tags, AdminState: i.AdminState, VCPUs: config.VCPUs(be),
		Memory: config.MemoryMiB(be), SpindleUse: config.ParamInt(be["spindle_use"], 1), OS: i.OS,
		Nodes: []string{names[i.PrimaryNode]}, DiskTemplate: i.DiskTemplate, DisksActive: i.AdminState == config.AdminUp,
		Hypervisor: i.Hypervisor}
	for _, n := range i.NICs {
		ai.NICs = append(ai.NICs, iallocator.NIC{MAC: n.MAC, IP: n.IP, Mode: n.Mode, Link: n.Link})
	}
	for _, d := range i.Disks {
		ai.Disks = append(ai.Disks, iallocator.Disk{SizeMiB: d.SizeMiB, Mode: d.Mode})
	}
	return ai
}

// runAllocator builds the request document, runs the allocator on it and
// turns an unsuccessful answer into Ganeti's error.
func (p *Processor) runAllocator(ctx context.Context, a iallocator.Allocator, c *iallocator.Cluster, r iallocator.Request) (*iallocator.Answer, error) {
	doc, err := iallocator.Build(c, r)
	if err != nil {
		return nil, err
	}
	ans, err := a.Run(ctx, doc)
	if err != nil {
		return nil, err
	}
	if !ans.Success {
		return nil, iallocator.Failure(a, doc, ans)
	}
	return ans, nil
}

// allocateWith places a new instance with an allocator: the node it
// answers, checked as a node given by name would be.
func (p *Processor) allocateWith(ctx context.Context, a iallocator.Allocator, req *iallocator.Allocate, nd need) (*config.Node, error) {
	ans, err := p.runAllocator(ctx, a, p.allocatorCluster(ctx, req.Hypervisor, req.DiskTemplate), req)
	if err != nil {
		return nil, err
	}
	n, ok := p.Cfg.Node(ans.Nodes[0])
	if !ok {
		return nil, ecode.ExecErrorf("iallocator '%s' chose node %s, which is not in the cluster", a.Name(), ans.Nodes[0])
	}
	if n.Offline || n.Drained || !n.VMCapable {
		return nil, ecode.Errorf(ecode.NoRes, "iallocator '%s' chose node %s, which is offline, drained or not vm_capable", a.Name(), n.Name)
	}
	if err := p.checkNodeRoom(ctx, n, nd, ""); err != nil {
		return nil, err
	}
	return n, nil
}
