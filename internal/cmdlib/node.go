package cmdlib

import (
	"context"
	"net"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// Version is the software version nodes must match.
const Version = layout.Version

type nodeAddLU struct {
	Node  *config.Node `json:"node"`
	Readd bool         `json:"readd,omitempty"`
}

func (lu *nodeAddLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Exclusive)}
}

func (lu *nodeAddLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	name := op.Str("node_name")
	if err := CheckName("node", name); err != nil {
		return err
	}
	if op.Bool("readd") {
		return lu.prereqReadd(ctx, p, op)
	}
	if _, ok := p.Cfg.Node(name); ok {
		return ecode.Errorf(ecode.Exists, "Node %s is already in the cluster", name)
	}
	ip := op.Str("primary_ip")
	if ip == "" {
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		if err != nil || len(addrs) == 0 {
			return ecode.Errorf(ecode.Resolver, "Cannot resolve node name %s; pass its primary IP", name)
		}
		ip = addrs[0]
	}
	if net.ParseIP(ip) == nil {
		return ecode.Errorf(ecode.Inval, "Invalid primary IP address '%s'", ip)
	}
	for _, n := range p.Cfg.Nodes() {
		if n.PrimaryIP == ip {
			return ecode.Errorf(ecode.NotUnique, "The primary IP %s is already used by node %s", ip, n.Name)
		}
	}
	group := op.Str("group")
	var g *config.NodeGroup
	if group == "" {
		gs := p.Cfg.Groups()
		if len(gs) == 0 {
			return ecode.Errorf(ecode.State, "The cluster has no node group")
		}
		g = gs[0]
		for _, x := range gs {
			if x.Name == "default" {
				g = x
			}
		}
	} else {
		var ok bool
		if g, ok = p.Cfg.Group(group); !ok {
			return ecode.Errorf(ecode.NoEnt, "Node group '%s' not known", group)
		}
	}
	n := &config.Node{
		Meta:          config.Meta{UUID: config.NewUUID(), Name: name},
		PrimaryIP:     ip,
		SecondaryIP:   ip,
		Group:         g.UUID,
		MasterCapable: boolOr(op.Params["master_capable"], true),
		VMCapable:     boolOr(op.Params["vm_capable"], true),
	}
	if s := op.Str("secondary_ip"); s != "" {
		n.SecondaryIP = s
	}
	// Contact the node daemon: its certificate must name this node (it
	// joined with a token), and it must run our version.
	var v nodeapi.VersionReply
	if err := p.RPC.Call(ctx, n, nodeapi.Version, "", struct{}{}, &v); err != nil {
		return ecode.Errorf(ecode.Environ, "Cannot reach the node daemon of %s at %s (has it joined with a token?): %v", name, ip, err)
	}
	if v.Version != Version {
		return ecode.Errorf(ecode.Environ, "Node %s runs version %s, the master runs %s", name, v.Version, Version)
	}
	cands := 0
	for _, x := range p.Cfg.Nodes() {
		if x.MasterCandidate {
			cands++
		}
	}
	n.MasterCandidate = n.MasterCapable && cands < p.Cfg.Cluster().CandidatePoolSize
	if err := mergeStaticState(op, &n.HVStateStatic, &n.DiskStateStatic); err != nil {
		return err
	}
	lu.Node = n
	return nil
}

func boolOr(v any, def bool) bool {
	if b, ok := v.(bool); ok {
		return b
	}
	return def
}

func (lu *nodeAddLU) Steps() []Step {
	if lu.Readd {
		return lu.readdSteps()
	}
	return []Step{sshNewNodeStep(lu.Node), {"add", func(ctx context.Context, s *StepCtx) error {
		s.Logf(ctx, "Adding node %s (%s) to the cluster", lu.Node.Name, lu.Node.PrimaryIP)
		s.Tx().PutNode(lu.Node.Clone())
		return nil
	}}, sshSyncStep()}
}

func (lu *nodeAddLU) Result() any { return nil }

type nodeRemoveLU struct {
	UUID string `json:"uuid"`
}

func (lu *nodeRemoveLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Exclusive)}
}

func (lu *nodeRemoveLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	n, err := p.Cfg.MustNode(op.Str("node_name"))
	if err != nil {
		return err
	}
	if n.UUID == p.Cfg.Cluster().MasterNode {
		return ecode.Errorf(ecode.Inval, "Node %s is the master node, failover to another node is required", n.Name)
	}
	for _, i := range p.Cfg.Instances() {
		if i.PrimaryNode == n.UUID {
			return ecode.Errorf(ecode.State, "Instance %s is still running on the node, please remove first", i.Name)
		}
	}
	lu.UUID = n.UUID
	return nil
}

func (lu *nodeRemoveLU) Steps() []Step {
	return []Step{sshLeaveStep(lu.UUID), {"remove", func(ctx context.Context, s *StepCtx) error {
		n, ok := s.Cfg().Node(lu.UUID)
		if !ok {
			return nil
		}
		s.Logf(ctx, "Removing node %s from the configuration", n.Name)
		s.Tx().DeleteNode(n)
		return nil
	}}, sshSyncStep()}
}

func (lu *nodeRemoveLU) Result() any { return nil }

type nodeSetParamsLU struct {
	Node    *config.Node `json:"node"`
	Changes [][2]any     `json:"changes"`
	// Etcd is the change of the node's etcd member that goes with a
	// promotion or demotion (nil: none); EtcdNote is logged instead when
	// the members are the operator's.
	Etcd     *etcdPlan `json:"etcd,omitempty"`
	EtcdNote string    `json:"etcd_note,omitempty"`
	// ParamsChanged: ndparams changed, which Ganeti does not list in
	// Changes.
	ParamsChanged bool `json:"params_changed,omitempty"`
}

func (lu *nodeSetParamsLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	level := locking.Shared
	if changesEtcdMembers(p, op) || sshChangesRoles(p, op) {
		// One membership change at a time: etcd takes one learner at a
		// time, and each change's quorum check assumes no other runs.
		// A change of SSH roles rewrites every node's key files from the
		// configuration: two at once could leave the older view last.
		level = locking.Exclusive
	}
	reqs := []locking.Request{bgl(level)}
	if n, ok := p.Cfg.Node(op.Str("node_name")); ok {
		reqs = append(reqs, nodeLock(locking.Exclusive, n.UUID))
	}
	return reqs
}

func (lu *nodeSetParamsLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	n, err := p.Cfg.MustNode(op.Str("node_name"))
	if err != nil {
		return err
	}
	isMaster := n.UUID == p.Cfg.Cluster().MasterNode
	flags := map[string]*bool{}
	for _, f := range []string{"master_candidate", "offline", "drained", "master_capable", "vm_capable"} {
		v := op.Params[f]
		if v == nil {
			continue
		}
		b, ok := v.(bool)
		if !ok {
			return ecode.Errorf(ecode.Inval, "Parameter %s must be a boolean", f)
		}
		flags[f] = &b
	}
	if len(flags) == 0 && op.Params["ndparams"] == nil && op.Str("secondary_ip") == "" && op.Params["powered"] == nil &&
		!stateGiven(op, "hv_state") && !stateGiven(op, "disk_state") {
		return ecode.Errorf(ecode.Inval, "Please pass at least one modification")
	}
	upd := n.Clone()
	if err := lu.checkParams(ctx, p, op, upd); err != nil {
		return err
	}
	set := 0
	for _, f := range []string{"master_candidate", "offline", "drained"} {
		if b := flags[f]; b != nil && *b {
			set++
		}
	}
	if set > 1 {
		return ecode.Errorf(ecode.Inval, "Only one of master_candidate, offline and drained can be set to true")
	}
	if isMaster {
		for _, f := range []string{"offline", "drained"} {
			if b := flags[f]; b != nil && *b {
				return ecode.Errorf(ecode.Inval, "The master node %s cannot be marked %s", n.Name, f)
			}
		}
		if b := flags["master_candidate"]; b != nil && !*b {
			return ecode.Errorf(ecode.Inval, "The master node %s cannot be demoted", n.Name)
		}
		if b := flags["master_capable"]; b != nil && !*b {
			return ecode.Errorf(ecode.Inval, "The master node %s must stay master capable", n.Name)
		}
	}
	apply := func(name string, dst *bool) {
		if b := flags[name]; b != nil && *dst != *b {
			*dst = *b
			lu.Changes = append(lu.Changes, [2]any{name, *b})
		}
	}
	apply("master_capable", &upd.MasterCapable)
	apply("vm_capable", &upd.VMCapable)
	apply("offline", &upd.Offline)
	apply("drained", &upd.Drained)
	apply("master_candidate", &upd.MasterCandidate)
	// Ganeti's implied changes: offline or drained nodes are no candidates,
	// and an offline node is not drained.
	if (upd.Offline || upd.Drained || !upd.MasterCapable) && upd.MasterCandidate {
		upd.MasterCandidate = false
		lu.Changes = append(lu.Changes, [2]any{"master_candidate", "auto-demotion due to offline, drained or not master capable"})
	}
	if upd.Offline && upd.Drained && flags["offline"] != nil {
		upd.Drained = false
		lu.Changes = append(lu.Changes, [2]any{"drained", "clear drained status due to offline"})
	}
	if b := flags["vm_capable"]; b != nil && !*b {
		for _, i := range p.Cfg.Instances() {
			if i.PrimaryNode == n.UUID {
				return ecode.Errorf(ecode.State, "Node %s still hosts instance %s; it cannot stop being vm capable", n.Name, i.Name)
			}
		}
	}
	if upd.MasterCandidate && !upd.MasterCapable {
		return ecode.Errorf(ecode.State, "Node %s is not master capable and cannot become a master candidate", n.Name)
	}
	if flags["offline"] != nil && !*flags["offline"] && n.Offline {
		// Coming back online: the node daemon must answer.
		var v nodeapi.VersionReply
		if err := p.RPC.Call(ctx, n, nodeapi.Version, "", struct{}{}, &v); err != nil {
			return ecode.Errorf(ecode.Environ, "Node %s does not answer; it cannot be marked online: %v", n.Name, err)
		}
	}
	plan, note, err := planEtcd(ctx, p, n, upd.MasterCandidate, upd.MasterCandidate != n.MasterCandidate,
		flags["master_candidate"] != nil, upd.Offline)
	if err != nil {
		return err
	}
	lu.Etcd, lu.EtcdNote = plan, note
	lu.Node = upd
	return nil
}

func (lu *nodeSetParamsLU) Steps() []Step { return append(lu.flagSteps(), lu.sshSteps()...) }

func (lu *nodeSetParamsLU) flagSteps() []Step {
	update := lu.updateStep()
	switch {
	case lu.Etcd != nil && lu.Etcd.Action == etcdAdd:
		// The node is a candidate first: a member half added is reported
		// by verify against a candidate, and repeating the promotion
		// finishes it.
		return append([]Step{update}, lu.etcdAddSteps()...)
	case lu.Etcd != nil && lu.Etcd.Action == etcdRemove:
		// The member goes first, so the node never counts towards the
		// store's quorum once the configuration no longer trusts it.
		return append(lu.etcdRemoveSteps(), update)
	}
	return []Step{update}
}

func (lu *nodeSetParamsLU) updateStep() Step {
	return Step{"update", func(ctx context.Context, s *StepCtx) error {
		if lu.EtcdNote != "" {
			s.Logf(ctx, "%s", lu.EtcdNote)
		}
		if len(lu.Changes) == 0 && !lu.ParamsChanged {
			return nil
		}
		cur, ok := s.Cfg().Node(lu.Node.UUID)
		if !ok {
			return ecode.Errorf(ecode.NoEnt, "Node %s disappeared", lu.Node.Name)
		}
		cur.MasterCandidate, cur.MasterCapable, cur.VMCapable = lu.Node.MasterCandidate, lu.Node.MasterCapable, lu.Node.VMCapable
		cur.Offline, cur.Drained = lu.Node.Offline, lu.Node.Drained
		cur.NDParams, cur.SecondaryIP = lu.Node.NDParams.Clone(), lu.Node.SecondaryIP
		cur.HVStateStatic, cur.DiskStateStatic = lu.Node.HVStateStatic.Clone(), lu.Node.DiskStateStatic.Clone()
		s.Tx().PutNode(cur)
		return nil
	}}
}

func (lu *nodeSetParamsLU) Result() any {
	if lu.Changes == nil {
		return [][2]any{}
	}
	return lu.Changes
}
