package cmdlib

import (
	"context"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
)

// runningInfo asks the primary node about the instance's process: nil when
// it does not run.
func (p *Processor) runningInfo(ctx context.Context, inst *config.Instance, node *config.Node) (*nodeapi.RunningInstance, error) {
	var list []nodeapi.RunningInstance
	if err := p.RPC.Call(ctx, node, nodeapi.InstanceList, "", nodeapi.InstanceListArgs{Hypervisors: []string{inst.Hypervisor}}, &list); err != nil {
		return nil, err
	}
	for i, r := range list {
		if r.UUID == inst.UUID || r.Name == inst.Name {
			return &list[i], nil
		}
	}
	return nil, nil
}

// confinementInfo is OP_INSTANCE_QUERY_DATA's "confinement": how the node
// confines the running process (nil when it does not run or the hypervisor
// does not confine).
func confinementInfo(ri *nodeapi.RunningInstance) any {
	if ri == nil || ri.Confinement == nil {
		return nil
	}
	c := ri.Confinement
	out := map[string]any{
		"security_model": c.SecurityModel, "uid": c.UID, "sandbox": c.Sandbox, "pid": ri.PID,
	}
	if c.User != "" {
		out["user"] = c.User
	}
	if c.Chroot != "" {
		out["chroot"] = c.Chroot
	}
	if len(c.Cgroups) > 0 {
		out["cgroups"] = c.Cgroups
	}
	if c.CgroupError != "" {
		out["cgroup_error"] = c.CgroupError
	}
	return out
}
