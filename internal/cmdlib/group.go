package cmdlib

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// groupUnits are the units of the node group opcodes.
func (p *Processor) groupUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_GROUP_ADD", func() LU { return &groupAddLU{} }),
		p.unit("OP_GROUP_REMOVE", func() LU { return &groupRemoveLU{} }),
		p.unit("OP_GROUP_SET_PARAMS", func() LU { return &groupSetParamsLU{} }),
		p.unit("OP_GROUP_RENAME", func() LU { return &groupRenameLU{} }),
		p.unit("OP_GROUP_ASSIGN_NODES", func() LU { return &groupAssignNodesLU{} }),
	}
}

// Ganeti's allocation policies (VALID_ALLOC_POLICIES).
var allocPolicies = []string{"preferred", "last_resort", "unallocable"}

// groupNameRE keeps group names usable as RAPI path segments and store
// keys; Ganeti itself only asks for a non-empty string, and every name
// its tools create matches.
var groupNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkGroupName(name string) error {
	if !groupNameRE.MatchString(name) {
		return ecode.Errorf(ecode.Inval, "Invalid node group name '%s': use letters, digits, '.', '_' and '-' (at most 128, starting with a letter or digit)", name)
	}
	return nil
}

func groupLock(mode locking.Mode, uuids ...string) locking.Request {
	return locking.Request{Level: locking.LevelNodeGroup, Names: uuids, Mode: mode}
}

// mustGroup is Group with Ganeti's "not known" error.
func (p *Processor) mustGroup(name string) (*config.NodeGroup, error) {
	g, ok := p.Cfg.Group(name)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Node group '%s' not known", name)
	}
	return g, nil
}

// groupNodes lists the names of the nodes in a group, sorted.
func (p *Processor) groupNodes(uuid string) []string {
	var out []string
	for _, n := range p.Cfg.Nodes() {
		if n.Group == uuid {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// checkAllocPolicy accepts a missing policy (null) or one of Ganeti's.
func checkAllocPolicy(op *opcodes.Op) (string, error) {
	pol := op.Str("alloc_policy")
	if pol == "" && op.Params["alloc_policy"] == nil {
		return "", nil
	}
	if !slices.Contains(allocPolicies, pol) {
		return "", ecode.Errorf(ecode.Inval, "Invalid allocation policy '%s': use one of %s", pol, strings.Join(allocPolicies, ", "))
	}
	return pol, nil
}

// groupChanges is what add and modify compute from their parameters.
type groupChanges struct {
	AllocPolicy string                   `json:"alloc_policy,omitempty"`
	NDParams    config.Params            `json:"ndparams,omitempty"`
	DiskParams  map[string]config.Params `json:"diskparams,omitempty"`
	IPolicy     config.Params            `json:"ipolicy,omitempty"`
	HVState     config.HVState           `json:"hv_state,omitempty"`
	DiskState   config.DiskState         `json:"disk_state,omitempty"`
	Changed     []string                 `json:"changed,omitempty"` // the parameters given, in order
}

// prepare checks the add or modify parameters against the group's current
// values (a new, empty group for add) and computes the new ones: the dicts
// are merged as the cluster's are, "default" or null removing a custom
// value.
func (c *groupChanges) prepare(p *Processor, op *opcodes.Op, g *config.NodeGroup) error {
	if stateGiven(op, "hv_state") {
		st, err := config.MergeHVState(g.HVStateStatic, op.Params["hv_state"])
		if err != nil {
			return err
		}
		c.HVState = st
		c.Changed = append(c.Changed, "hv_state")
	}
	if stateGiven(op, "disk_state") {
		st, err := config.MergeDiskState(g.DiskStateStatic, op.Params["disk_state"])
		if err != nil {
			return err
		}
		c.DiskState = st
		c.Changed = append(c.Changed, "disk_state")
	}
	pol, err := checkAllocPolicy(op)
	if err != nil {
		return err
	}
	if pol != "" {
		c.AllocPolicy = pol
		c.Changed = append(c.Changed, "alloc_policy")
	}
	if v := op.Params["ndparams"]; v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return ecode.Errorf(ecode.Inval, "ndparams must be a dict")
		}
		if c.NDParams, err = checkNDParams(g.NDParams, m); err != nil {
			return err
		}
		c.Changed = append(c.Changed, "ndparams")
	}
	if v := op.Params["diskparams"]; v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return ecode.Errorf(ecode.Inval, "diskparams must be a dict of disk template dicts")
		}
		if c.DiskParams, err = checkDiskParams(g.DiskParams, m); err != nil {
			return err
		}
		c.Changed = append(c.Changed, "diskparams")
	}
	if v := op.Params["ipolicy"]; v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return ecode.Errorf(ecode.Inval, "ipolicy must be a dict")
		}
		if c.IPolicy, err = checkGroupIPolicy(p.Cfg.Cluster(), g.IPolicy, m); err != nil {
			return err
		}
		c.Changed = append(c.Changed, "ipolicy")
	}
	return nil
}

// apply writes the computed values into g.
func (c *groupChanges) apply(g *config.NodeGroup) {
	for _, f := range c.Changed {
		switch f {
		case "alloc_policy":
			g.AllocPolicy = c.AllocPolicy
		case "ndparams":
			g.NDParams = c.NDParams.Clone()
		case "diskparams":
			g.DiskParams = cloneParamsMap(c.DiskParams)
		case "ipolicy":
			g.IPolicy = c.IPolicy.Clone()
		case "hv_state":
			g.HVStateStatic = c.HVState.Clone()
		case "disk_state":
			g.DiskStateStatic = c.DiskState.Clone()
		}
	}
}

func cloneParamsMap(m map[string]config.Params) map[string]config.Params {
	if m == nil {
		return nil
	}
	out := make(map[string]config.Params, len(m))
	for k, v := range m {
		out[k] = v.Clone()
	}
	return out
}

type groupAddLU struct {
	Group *config.NodeGroup `json:"group"`
}

// Adding takes no group lock: the new name is checked here and again by
// the store, whose name index refuses a second group of that name.
func (lu *groupAddLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Shared)}
}

func (lu *groupAddLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	name := op.Str("group_name")
	if err := checkGroupName(name); err != nil {
		return err
	}
	if g, ok := p.Cfg.Group(name); ok {
		return ecode.Errorf(ecode.Exists, "Desired group name '%s' already exists as a node group (UUID: %s)", name, g.UUID)
	}
	g := &config.NodeGroup{Meta: config.Meta{UUID: config.NewUUID(), Name: name}, AllocPolicy: "preferred", NDParams: config.Params{}}
	var c groupChanges
	if err := c.prepare(p, op, g); err != nil {
		return err
	}
	c.apply(g)
	lu.Group = g
	return nil
}

func (lu *groupAddLU) Steps() []Step {
	return []Step{{"add", func(ctx context.Context, s *StepCtx) error {
		s.Logf(ctx, "Adding node group %s", lu.Group.Name)
		s.Tx().PutGroup(lu.Group.Clone())
		return nil
	}}}
}

func (lu *groupAddLU) Result() any { return nil }

type groupRemoveLU struct {
	UUID string `json:"uuid"`
	Name string `json:"name"`
}

func (lu *groupRemoveLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := []locking.Request{bgl(locking.Shared)}
	if g, ok := p.Cfg.Group(op.Str("group_name")); ok {
		reqs = append(reqs, groupLock(locking.Exclusive, g.UUID))
	}
	return reqs
}

func (lu *groupRemoveLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	g, err := p.mustGroup(op.Str("group_name"))
	if err != nil {
		return err
	}
	// Nodes join a group only under the exclusive BGL (node add) or the
	// group's lock (assign-nodes), so this check holds until the commit.
	if nodes := p.groupNodes(g.UUID); len(nodes) > 0 {
		return ecode.Errorf(ecode.State, "Group '%s' not empty, has the following nodes: %s", g.Name, strings.Join(nodes, ", "))
	}
	if len(p.Cfg.Groups()) == 1 {
		return ecode.Errorf(ecode.State, "Group '%s' is the only group, cannot be removed", g.Name)
	}
	lu.UUID, lu.Name = g.UUID, g.Name
	return nil
}

func (lu *groupRemoveLU) Steps() []Step {
	return []Step{{"remove", func(ctx context.Context, s *StepCtx) error {
		g, ok := s.Cfg().Group(lu.UUID)
		if !ok {
			return ecode.ExecErrorf("Group '%s' with UUID %s disappeared", lu.Name, lu.UUID)
		}
		s.Logf(ctx, "Removing node group %s", g.Name)
		s.Tx().DeleteGroup(g)
		return nil
	}}}
}

func (lu *groupRemoveLU) Result() any { return nil }

type groupSetParamsLU struct {
	UUID    string       `json:"uuid"`
	Changes groupChanges `json:"changes"`
	Out     [][2]any     `json:"result"`
}

func (lu *groupSetParamsLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := []locking.Request{bgl(locking.Shared)}
	if g, ok := p.Cfg.Group(op.Str("group_name")); ok {
		reqs = append(reqs, groupLock(locking.Exclusive, g.UUID))
	}
	return reqs
}

func (lu *groupSetParamsLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	given := false
	for _, f := range []string{"alloc_policy", "ndparams", "diskparams", "ipolicy", "hv_state", "disk_state"} {
		if op.Params[f] != nil {
			given = true
		}
	}
	if !given {
		return ecode.Errorf(ecode.Inval, "Please pass at least one modification")
	}
	g, err := p.mustGroup(op.Str("group_name"))
	if err != nil {
		return err
	}
	if err := lu.Changes.prepare(p, op, g); err != nil {
		return err
	}
	lu.UUID = g.UUID
	upd := g.Clone()
	lu.Changes.apply(upd)
	lu.Out = [][2]any{}
	for _, f := range lu.Changes.Changed {
		var v any
		switch f {
		case "alloc_policy":
			v = upd.AllocPolicy
		case "ndparams":
			v = opcodes.ParamText(map[string]any(upd.NDParams))
		case "diskparams":
			v = opcodes.ParamText(upd.DiskParams)
		case "ipolicy":
			v = opcodes.ParamText(map[string]any(upd.IPolicy))
		case "hv_state":
			v = opcodes.ParamText(upd.HVStateStatic)
		case "disk_state":
			v = opcodes.ParamText(upd.DiskStateStatic)
		}
		lu.Out = append(lu.Out, [2]any{f, v})
	}
	return nil
}

func (lu *groupSetParamsLU) Steps() []Step {
	return []Step{{"update", func(ctx context.Context, s *StepCtx) error {
		g, ok := s.Cfg().Group(lu.UUID)
		if !ok {
			return ecode.ExecErrorf("Node group %s disappeared", lu.UUID)
		}
		lu.Changes.apply(g)
		s.Tx().PutGroup(g)
		return nil
	}}}
}

func (lu *groupSetParamsLU) Result() any {
	if lu.Out == nil {
		return [][2]any{}
	}
	return lu.Out
}

type groupRenameLU struct {
	UUID    string `json:"uuid"`
	NewName string `json:"new_name"`
}

func (lu *groupRenameLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := []locking.Request{bgl(locking.Shared)}
	if g, ok := p.Cfg.Group(op.Str("group_name")); ok {
		reqs = append(reqs, groupLock(locking.Exclusive, g.UUID))
	}
	return reqs
}

func (lu *groupRenameLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	g, err := p.mustGroup(op.Str("group_name"))
	if err != nil {
		return err
	}
	name := op.Str("new_name")
	if err := checkGroupName(name); err != nil {
		return err
	}
	if other, ok := p.Cfg.Group(name); ok {
		return ecode.Errorf(ecode.Exists, "Desired new name '%s' clashes with existing node group (UUID: %s)", name, other.UUID)
	}
	lu.UUID, lu.NewName = g.UUID, name
	return nil
}

func (lu *groupRenameLU) Steps() []Step {
	return []Step{{"rename", func(ctx context.Context, s *StepCtx) error {
		g, ok := s.Cfg().Group(lu.UUID)
		if !ok {
			return ecode.ExecErrorf("Node group %s disappeared", lu.UUID)
		}
		s.Logf(ctx, "Renaming node group %s to %s", g.Name, lu.NewName)
		g.Name = lu.NewName
		s.Tx().PutGroup(g)
		return nil
	}}}
}

func (lu *groupRenameLU) Result() any { return lu.NewName }

type groupAssignNodesLU struct {
	UUID  string   `json:"uuid"`
	Nodes []string `json:"nodes"` // uuids of the nodes that change group
}

// Assigning locks every group: the nodes' current groups are only known
// from the configuration, and every one of them changes.
func (lu *groupAssignNodesLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := []locking.Request{bgl(locking.Shared), groupLock(locking.Exclusive, locking.All)}
	var uuids []string
	for _, name := range op.Strings("nodes") {
		if n, ok := p.Cfg.Node(name); ok && !slices.Contains(uuids, n.UUID) {
			uuids = append(uuids, n.UUID)
		}
	}
	if len(uuids) > 0 {
		reqs = append(reqs, nodeLock(locking.Exclusive, uuids...))
	}
	return reqs
}

func (lu *groupAssignNodesLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	g, err := p.mustGroup(op.Str("group_name"))
	if err != nil {
		return err
	}
	names := op.Strings("nodes")
	if len(names) == 0 {
		return ecode.Errorf(ecode.Inval, "No nodes given")
	}
	nodeGroup := map[string]string{} // node uuid -> group uuid
	nodeName := map[string]string{}
	for _, n := range p.Cfg.Nodes() {
		nodeGroup[n.UUID], nodeName[n.UUID] = n.Group, n.Name
	}
	moves := map[string]string{}
	var moved []string
	for _, name := range names {
		n, err := p.Cfg.MustNode(name)
		if err != nil {
			return err
		}
		if n.Group != g.UUID {
			moves[n.UUID] = g.UUID
			if !slices.Contains(moved, n.UUID) {
				moved = append(moved, n.UUID)
			}
		}
	}
	instNodes := map[string][]string{}
	p.Cfg.VisitInstances(func(i *config.Instance) bool {
		if mirrored(i.DiskTemplate) {
			instNodes[i.Name] = instanceNodes(i)
		}
		return true
	})
	newSplits, stillSplit := splitInstances(moves, nodeGroup, instNodes)
	if len(newSplits) > 0 {
		if !op.Bool("force") {
			return ecode.ExecErrorf("The following instances get split by this change and --force was not given: %s", strings.Join(newSplits, ", "))
		}
		p.Log.Warn("assigning nodes splits instances between groups", "group", g.Name, "instances", newSplits, "already_split", stillSplit)
	}
	lu.UUID, lu.Nodes = g.UUID, moved
	return nil
}

// mirrored reports whether a disk template keeps a copy of each disk on
// a secondary node (Ganeti's DTS_INT_MIRROR, drbd). Only such instances
// span nodes, and so only they can end up split between groups. Corral's
// templates (file, diskless) have a primary node only: moving a node never
// splits an instance today, and force changes nothing until a mirrored
// template exists.
func mirrored(template string) bool { return template == "drbd" }

// instanceNodes lists the nodes an instance uses: its primary only, as no
// template Corral implements has secondaries.
func instanceNodes(i *config.Instance) []string { return []string{i.PrimaryNode} }

// splitInstances applies moves (node uuid -> new group uuid) to nodeGroup
// (node uuid -> group uuid) and returns the instances of instNodes
// (name -> node uuids) that the moves split between groups, and those
// already split that stay split; both sorted.
func splitInstances(moves, nodeGroup map[string]string, instNodes map[string][]string) (newSplits, stillSplit []string) {
	groupsOf := func(nodes []string, after bool) int {
		seen := map[string]bool{}
		for _, n := range nodes {
			g := nodeGroup[n]
			if to, ok := moves[n]; ok && after {
				g = to
			}
			seen[g] = true
		}
		return len(seen)
	}
	for name, nodes := range instNodes {
		before, after := groupsOf(nodes, false) > 1, groupsOf(nodes, true) > 1
		switch {
		case after && !before:
			newSplits = append(newSplits, name)
		case after && before:
			stillSplit = append(stillSplit, name)
		}
	}
	sort.Strings(newSplits)
	sort.Strings(stillSplit)
	return newSplits, stillSplit
}

func (lu *groupAssignNodesLU) Steps() []Step {
	return []Step{{"assign", func(ctx context.Context, s *StepCtx) error {
		g, ok := s.Cfg().Group(lu.UUID)
		if !ok {
			return ecode.ExecErrorf("Node group %s disappeared", lu.UUID)
		}
		touched := map[string]bool{}
		for _, u := range lu.Nodes {
			n, ok := s.Cfg().Node(u)
			if !ok {
				return ecode.ExecErrorf("Node %s disappeared", u)
			}
			if n.Group == g.UUID {
				continue
			}
			s.Logf(ctx, "Moving node %s to group %s", n.Name, g.Name)
			touched[n.Group] = true
			n.Group = g.UUID
			s.Tx().PutNode(n)
		}
		if len(touched) == 0 {
			return nil
		}
		// Ganeti bumps the serial of every group whose membership
		// changed, so readers of a group see that its node list moved.
		touched[g.UUID] = true
		for _, u := range slices.Sorted(maps.Keys(touched)) {
			if og, ok := s.Cfg().Group(u); ok {
				s.Tx().PutGroup(og)
			}
		}
		return nil
	}}}
}

func (lu *groupAssignNodesLU) Result() any { return nil }
