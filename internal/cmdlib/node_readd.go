package cmdlib

import (
	"context"
	"net"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// prereqReadd plans OP_NODE_ADD with readd: a node already in the
// configuration (back from maintenance, or reinstalled and joined again
// with a token made with readd) comes back online with its uuid, group,
// instances and parameters. Ganeti's rules: not the master, no group, the
// same secondary IP; a new primary IP is taken if no other node uses it.
// The offline and drained flags are reset. Unlike Ganeti it does not
// promote the node to master candidate (a promotion changes the store's
// members on etcd clusters: 'corral node modify --master-candidate yes'
// does that), but a node no longer master capable is demoted.
func (lu *nodeAddLU) prereqReadd(ctx context.Context, p *Processor, op *opcodes.Op) error {
	name := op.Str("node_name")
	old, ok := p.Cfg.Node(name)
	if !ok {
		return ecode.Errorf(ecode.NoEnt, "Node %s is not in the configuration", name)
	}
	if old.UUID == p.Cfg.Cluster().MasterNode {
		return ecode.Errorf(ecode.State, "Cannot readd the master node")
	}
	if op.Str("group") != "" {
		return ecode.Errorf(ecode.Inval, "Cannot pass a node group when a node is being readded")
	}
	n := old.Clone()
	if ip := op.Str("primary_ip"); ip != "" {
		if net.ParseIP(ip) == nil {
			return ecode.Errorf(ecode.Inval, "Invalid primary IP address '%s'", ip)
		}
		n.PrimaryIP = ip
	}
	if sip := op.Str("secondary_ip"); sip != "" && sip != old.SecondaryIP {
		return ecode.Errorf(ecode.Inval, "Readded node doesn't have the same IP address configuration as before")
	}
	for _, x := range p.Cfg.Nodes() {
		if x.UUID != n.UUID && (x.PrimaryIP == n.PrimaryIP || x.SecondaryIP == n.PrimaryIP) {
			return ecode.Errorf(ecode.NotUnique, "New node ip address(es) conflict with existing node %s", x.Name)
		}
	}
	n.MasterCapable = boolOr(op.Params["master_capable"], old.MasterCapable)
	n.VMCapable = boolOr(op.Params["vm_capable"], old.VMCapable)
	if !n.VMCapable {
		for _, i := range p.Cfg.Instances() {
			if i.PrimaryNode == n.UUID {
				return ecode.Errorf(ecode.State, "Node %s being re-added with vm_capable flag set to false, but it already holds instances", name)
			}
		}
	}
	var v nodeapi.VersionReply
	if err := p.RPC.Call(ctx, n, nodeapi.Version, "", struct{}{}, &v); err != nil {
		return ecode.Errorf(ecode.Environ, "Can't get version information from node %s: %w", name, err)
	}
	if v.Version != Version {
		return ecode.Errorf(ecode.Environ, "Version mismatch master version %s, node version %s", Version, v.Version)
	}
	if old.MasterCandidate && !n.MasterCapable {
		// A demotion changes the store's members.
		return ecode.Errorf(ecode.State, "Node %s is a master candidate: demote it with 'node modify --master-candidate no' before re-adding it as not master capable", name)
	}
	n.Offline, n.Drained, n.MasterCandidate = false, false, old.MasterCandidate
	if err := mergeStaticState(op, &n.HVStateStatic, &n.DiskStateStatic); err != nil {
		return err
	}
	lu.Node, lu.Readd = n, true
	return nil
}

// readdSteps have the node make its SSH key pair if it lost it, record it
// back online, and bring every node's SSH key files up to date.
func (lu *nodeAddLU) readdSteps() []Step {
	return []Step{sshNewNodeStep(lu.Node), {"readd", func(ctx context.Context, s *StepCtx) error {
		cur, ok := s.Cfg().Node(lu.Node.UUID)
		if !ok {
			return ecode.Errorf(ecode.NoEnt, "Node %s disappeared", lu.Node.Name)
		}
		s.Logf(ctx, "Readding node %s (%s), the offline/drained flags were reset", cur.Name, lu.Node.PrimaryIP)
		cur.PrimaryIP, cur.MasterCapable, cur.VMCapable = lu.Node.PrimaryIP, lu.Node.MasterCapable, lu.Node.VMCapable
		cur.Offline, cur.Drained, cur.MasterCandidate = false, false, lu.Node.MasterCandidate
		cur.HVStateStatic, cur.DiskStateStatic = lu.Node.HVStateStatic.Clone(), lu.Node.DiskStateStatic.Clone()
		s.Tx().PutNode(cur)
		return nil
	}}, sshSyncStep()}
}
