package cmdlib

import (
	"context"
	"sync"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// The cluster IP, Ganeti's master IP: a floating address that the node
// the master runs on holds on the master network device. The units ask
// that node's daemon to add or remove it; corrald moves it when it
// becomes master (ClaimMasterIP); cluster verify checks where it is.

func (p *Processor) masterIPUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_CLUSTER_ACTIVATE_MASTER_IP", func() LU { return &masterIPLU{Activate: true} }),
		p.unit("OP_CLUSTER_DEACTIVATE_MASTER_IP", func() LU { return &masterIPLU{} }),
	}
}

// masterIPArgs are the cluster's master network parameters for the node
// RPCs.
func masterIPArgs(c *config.Cluster) nodeapi.MasterIPArgs {
	return nodeapi.MasterIPArgs{Address: c.ClusterIP, Netmask: c.MasterIPNetmask(), Netdev: c.MasterNetdev}
}

// MasterIPNode is the node the master runs on, which holds the cluster
// IP: the node named SelfNode when there is one (an elected master's
// candidate name), else the configuration's master node.
func (p *Processor) MasterIPNode() (*config.Node, error) {
	if p.SelfNode != "" {
		if n, ok := p.Cfg.Node(p.SelfNode); ok {
			return n, nil
		}
	}
	c := p.Cfg.Cluster()
	n, ok := p.Cfg.Node(c.MasterNode)
	if !ok {
		return nil, ecode.Errorf(ecode.State, "The master node %s is not in the configuration", c.MasterNode)
	}
	return n, nil
}

// errNoClusterIP is the answer of the master IP opcodes on a cluster
// without one.
func errNoClusterIP() error {
	return ecode.Errorf(ecode.Inval, "The cluster has no cluster IP: set one with 'corral cluster modify --cluster-ip IP --master-netdev DEV'")
}

// masterIPLU is OP_CLUSTER_ACTIVATE_MASTER_IP (Activate) and
// OP_CLUSTER_DEACTIVATE_MASTER_IP: the master's node adds or removes the
// cluster IP.
type masterIPLU struct {
	Activate bool   `json:"activate"`
	Node     string `json:"node"`
}

func (lu *masterIPLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Shared)}
}

func (lu *masterIPLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	if p.Cfg.Cluster().ClusterIP == "" {
		return errNoClusterIP()
	}
	n, err := p.MasterIPNode()
	if err != nil {
		return err
	}
	lu.Node = n.Name
	return nil
}

func (lu *masterIPLU) Steps() []Step {
	return []Step{{"master-ip", func(ctx context.Context, s *StepCtx) error {
		c := s.Cfg().Cluster()
		if c.ClusterIP == "" {
			return errNoClusterIP()
		}
		n, ok := s.Cfg().Node(lu.Node)
		if !ok {
			return ecode.Errorf(ecode.State, "Node %s left the cluster", lu.Node)
		}
		method, what := nodeapi.DeactivateMasterIP, "deactivate"
		if lu.Activate {
			method, what = nodeapi.ActivateMasterIP, "activate"
		}
		args := masterIPArgs(c)
		var rep nodeapi.MasterIPReply
		if err := s.RPC(ctx, n, method, args, &rep); err != nil {
			return ecode.ExecErrorf("Could not %s the master IP on node %s: %w", what, n.Name, err)
		}
		state := "unchanged"
		if rep.Changed {
			state = "changed"
		}
		s.Logf(ctx, "Master IP %s/%d on %s of node %s: %sd (%s)", args.Address, args.Netmask, args.Netdev, n.Name, what, state)
		return nil
	}}}
}

func (lu *masterIPLU) Result() any { return nil }

// claimTimeout bounds each node call of ClaimMasterIP.
const claimTimeout = 10 * time.Second

// ClaimMasterIP is what a master does when it starts: its node activates
// the cluster IP and every other online node is told to deactivate it, so
// that after a failover the old master's node lets it go if it can be
// reached. Calls to other nodes are best effort, in parallel; the error is
// the master's own node's. Nothing is done on a cluster without a
// cluster IP.
func (p *Processor) ClaimMasterIP(ctx context.Context) error {
	c := p.Cfg.Cluster()
	if c.ClusterIP == "" {
		return nil
	}
	self, err := p.MasterIPNode()
	if err != nil {
		return err
	}
	args := masterIPArgs(c)
	var wg sync.WaitGroup
	for _, n := range p.Cfg.Nodes() {
		if n.Offline || n.UUID == self.UUID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, claimTimeout)
			defer cancel()
			var rep nodeapi.MasterIPReply
			if err := p.RPC.Call(cctx, n, nodeapi.DeactivateMasterIP, "", args, &rep); err != nil {
				p.Log.Warn("could not tell a node to let go of the master IP", "node", n.Name, "ip", args.Address, "err", err)
			} else if rep.Changed {
				p.Log.Info("master IP deactivated on a node that is not the master's", "node", n.Name, "ip", args.Address)
			}
		}()
	}
	wg.Wait()
	cctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	var rep nodeapi.MasterIPReply
	if err := p.RPC.Call(cctx, self, nodeapi.ActivateMasterIP, "", args, &rep); err != nil {
		return ecode.ExecErrorf("Could not activate the master IP on node %s: %w", self.Name, err)
	}
	p.Log.Info("master IP active on the master's node", "node", self.Name, "ip", args.Address, "netdev", args.Netdev, "changed", rep.Changed)
	return nil
}

// verifyMasterIP reports the cluster IP missing on the master's node or
// present on another node.
func (lu *clusterVerifyLU) verifyMasterIP(ctx context.Context, p *Processor) {
	c := p.Cfg.Cluster()
	if c.ClusterIP == "" {
		return
	}
	self, err := p.MasterIPNode()
	if err != nil {
		lu.errf("cluster: %v", err)
		return
	}
	args := masterIPArgs(c)
	for _, n := range p.Cfg.Nodes() {
		if n.Offline {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, claimTimeout)
		var rep nodeapi.MasterIPReply
		err := p.RPC.Call(cctx, n, nodeapi.MasterIPStatus, "", args, &rep)
		cancel()
		switch {
		case err != nil:
			lu.warnf("node %s: cannot tell whether it holds the master IP %s: %v", n.Name, args.Address, err)
		case n.UUID == self.UUID && !rep.Present:
			lu.errf("node %s: the master IP %s is not on %s of the master's node", n.Name, args.Address, args.Netdev)
		case n.UUID != self.UUID && rep.Present:
			lu.errf("node %s: the master IP %s is on %s, but the master runs on node %s", n.Name, args.Address, args.Netdev, self.Name)
		}
	}
}

// setMasterNetwork applies cluster_ip, master_netdev and master_netmask of
// OP_CLUSTER_SET_PARAMS to c. When the cluster IP's parameters change and
// it had one, old holds them, for the step that takes it down first.
func setMasterNetwork(p *Processor, op *opcodes.Op, c *config.Cluster, changed *bool) (old *nodeapi.MasterIPArgs, moved bool, err error) {
	ip, netdev, netmask := c.ClusterIP, c.MasterNetdev, c.MasterNetmask
	if v, ok := op.Params["cluster_ip"].(string); ok {
		ip = v
	}
	if v, ok := op.Params["master_netdev"].(string); ok {
		netdev = v
	}
	if v, ok := op.Params["master_netmask"].(float64); ok {
		netmask = int(v)
		if netmask == 0 || float64(netmask) != v {
			return nil, false, ecode.Errorf(ecode.Inval, "Invalid master netmask %v (a prefix length)", v)
		}
	}
	if ip == c.ClusterIP && netdev == c.MasterNetdev && netmask == c.MasterNetmask {
		return nil, false, nil
	}
	if ip != "" {
		for _, n := range p.Cfg.Nodes() {
			if n.PrimaryIP == ip || n.SecondaryIP == ip {
				return nil, false, ecode.Errorf(ecode.Inval, "The cluster IP %s is node %s's own address", ip, n.Name)
			}
		}
	}
	if err := config.CheckMasterNetwork(ip, netdev, netmask); err != nil {
		return nil, false, err
	}
	if c.ClusterIP != "" {
		a := masterIPArgs(c)
		old = &a
	}
	c.ClusterIP, c.MasterNetdev, c.MasterNetmask = ip, netdev, netmask
	*changed = true
	return old, true, nil
}

// masterIPSteps surround OP_CLUSTER_SET_PARAMS's update when it changes
// the cluster IP: the master's node removes the old address before, and
// adds the new one after, as Ganeti does for a new master netdev. A node
// that cannot do either is reported, not fatal: the configuration is the
// operator's, and activate-master-ip or the next master start repairs it.
func (lu *clusterSetParamsLU) masterIPSteps(update []Step) []Step {
	if !lu.MasterIPMoved {
		return update
	}
	var out []Step
	if lu.OldMasterIP != nil {
		out = append(out, Step{"master-ip-down", func(ctx context.Context, s *StepCtx) error {
			n, err := s.p.MasterIPNode()
			if err != nil {
				return err
			}
			if err := s.RPC(ctx, n, nodeapi.DeactivateMasterIP, *lu.OldMasterIP, nil); err != nil {
				s.Logf(ctx, "Warning: could not take the old master IP %s off %s of node %s: %v", lu.OldMasterIP.Address, lu.OldMasterIP.Netdev, n.Name, err)
			}
			return nil
		}})
	}
	out = append(out, update...)
	return append(out, Step{"master-ip-up", func(ctx context.Context, s *StepCtx) error {
		c := s.Cfg().Cluster()
		if c.ClusterIP == "" {
			return nil
		}
		n, err := s.p.MasterIPNode()
		if err != nil {
			return err
		}
		args := masterIPArgs(c)
		if err := s.RPC(ctx, n, nodeapi.ActivateMasterIP, args, nil); err != nil {
			s.Logf(ctx, "Warning: could not put the master IP %s on %s of node %s (run 'corral cluster activate-master-ip'): %v", args.Address, args.Netdev, n.Name, err)
			return nil
		}
		s.Logf(ctx, "Master IP %s/%d active on %s of node %s", args.Address, args.Netmask, args.Netdev, n.Name)
		return nil
	}})
}
