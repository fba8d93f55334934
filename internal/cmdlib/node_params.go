package cmdlib

import (
	"context"
	"net"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// ndGlobals are Ganeti's NDC_GLOBALS: node parameters set for the whole
// cluster or a group only.
var ndGlobals = []string{"exclusive_storage"}

// checkParams checks OP_NODE_SET_PARAMS's ndparams, secondary_ip and
// powered against node n and applies them to upd, with Ganeti's errors.
func (lu *nodeSetParamsLU) checkParams(ctx context.Context, p *Processor, op *opcodes.Op, upd *config.Node) error {
	if op.Params["powered"] != nil {
		return ecode.Errorf(ecode.State, "Unable to change powered state for node %s as it does not support out-of-band handling", upd.Name)
	}
	if v := op.Params["ndparams"]; v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return ecode.Errorf(ecode.Inval, "ndparams must be a dict")
		}
		var globals []string
		for _, k := range ndGlobals {
			if _, set := m[k]; set {
				globals = append(globals, k)
			}
		}
		if len(globals) > 0 {
			return ecode.Errorf(ecode.Inval, "The following node parameters are global and cannot be customized at node level, please modify them at cluster or group level: %s", commaJoin(globals))
		}
		nd, err := checkNDParams(upd.NDParams, m)
		if err != nil {
			return err
		}
		upd.NDParams = nd
		lu.ParamsChanged = true
	}
	if err := mergeStaticState(op, &upd.HVStateStatic, &upd.DiskStateStatic); err != nil {
		return err
	}
	if stateGiven(op, "hv_state") || stateGiven(op, "disk_state") {
		// As ndparams, Ganeti does not list these among the changes.
		lu.ParamsChanged = true
	}
	if ip := op.Str("secondary_ip"); ip != "" {
		if err := lu.checkSecondaryIP(ctx, p, op, upd, ip); err != nil {
			return err
		}
		if upd.SecondaryIP != ip {
			upd.SecondaryIP = ip
			lu.Changes = append(lu.Changes, [2]any{"secondary_ip", ip})
		}
	}
	return nil
}

// checkSecondaryIP applies Ganeti's rules: an IPv4 address; a cluster
// whose master has one address (single-homed) gets second addresses, or
// a multi-homed one loses them, only through the master with force; an
// online node must own the address. Corral has no disk template that
// replicates over the secondary network, so no instance is affected.
func (lu *nodeSetParamsLU) checkSecondaryIP(ctx context.Context, p *Processor, op *opcodes.Op, n *config.Node, ip string) error {
	if a := net.ParseIP(ip); a == nil || a.To4() == nil {
		return ecode.Errorf(ecode.Inval, "Secondary IP (%s) needs to be a valid IPv4 address", ip)
	}
	master, ok := p.Cfg.Node(p.Cfg.Cluster().MasterNode)
	if !ok {
		return ecode.Errorf(ecode.State, "The master node is not in the configuration")
	}
	singleHomed := master.SecondaryIP == master.PrimaryIP
	isMaster := n.UUID == master.UUID
	switch {
	case singleHomed && ip != n.PrimaryIP && !(op.Bool("force") && isMaster):
		return ecode.Errorf(ecode.Inval, "Changing the secondary ip on a single-homed cluster requires the --force option to be passed, and the target node to be the master")
	case !singleHomed && ip == n.PrimaryIP && !(op.Bool("force") && isMaster):
		return ecode.Errorf(ecode.Inval, "Cannot set the secondary IP to be the same as the primary IP on a multi-homed cluster, unless the --force option is passed, and the target node is the master")
	}
	for _, x := range p.Cfg.Nodes() {
		if x.UUID != n.UUID && (x.PrimaryIP == ip || x.SecondaryIP == ip) {
			return ecode.Errorf(ecode.NotUnique, "The secondary IP %s is already used by node %s", ip, x.Name)
		}
	}
	if n.Offline {
		return nil
	}
	var has bool
	if err := p.RPC.Call(ctx, n, nodeapi.HasIPAddress, "", nodeapi.HasIPAddressArgs{Address: ip}, &has); err != nil {
		return ecode.Errorf(ecode.Environ, "Failure checking secondary ip on node %s: %w", n.Name, err)
	}
	if !has {
		return ecode.Errorf(ecode.Environ, "Node claims it doesn't have the secondary ip you gave (%s), please fix and re-run this command", ip)
	}
	return nil
}

func commaJoin(l []string) string {
	l = slices.Clone(l)
	slices.Sort(l)
	return strings.Join(l, ", ")
}
