package cmdlib

import (
	"context"
	"slices"
	"sort"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/query"
)

// osUnits are the units of the OS opcodes.
func (p *Processor) osUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_OS_DIAGNOSE", func() LU { return &osDiagnoseLU{} }),
	}
}

// osFields are the output fields of OP_OS_DIAGNOSE, as Ganeti's OS query.
var osFields = []string{"name", "valid", "variants", "node_status", "hidden", "blacklisted", "api_versions", "parameters", "trusted", "os_hvp", "osparams"}

// OSStatus is what the cluster knows of one OS definition: its merge over
// every vm_capable, online node that answered. It is the OS query's row,
// so OP_OS_DIAGNOSE and LUXI's OS queries share one merge.
type OSStatus = query.OSRow

// MergeOS combines each node's OS list as Ganeti does: an OS is valid only
// when every node has a valid copy; variants, parameters and API versions
// are those every node offers. Nodes are keyed by name.
func MergeOS(perNode map[string][]nodeapi.OSInfo, c *config.Cluster) []OSStatus {
	nodes := make([]string, 0, len(perNode))
	for n := range perNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	byName := map[string]map[string]*nodeapi.OSInfo{} // os -> node -> first definition found
	for _, n := range nodes {
		for i := range perNode[n] {
			o := &perNode[n][i]
			if byName[o.Name] == nil {
				byName[o.Name] = map[string]*nodeapi.OSInfo{}
			}
			// The first definition in the search path is the one used.
			if _, seen := byName[o.Name][n]; !seen {
				byName[o.Name][n] = o
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]OSStatus, 0, len(names))
	for _, name := range names {
		st := OSStatus{Name: name, Valid: true, Trusted: true, NodeStatus: map[string][]any{},
			Hidden: c != nil && slices.Contains(c.HiddenOS, name), Blacklisted: c != nil && slices.Contains(c.BlacklistedOS, name)}
		for i, n := range nodes {
			o := byName[name][n]
			if o == nil {
				st.NodeStatus[n] = []any{}
				st.Valid = false
				continue
			}
			st.NodeStatus[n] = []any{[]any{o.Path, o.Valid, o.Error, osStrings(o.Variants), osPairs(o.Parameters), osInts(o.APIVersions), o.Trusted}}
			if !o.Valid {
				st.Valid = false
			}
			st.Trusted = st.Trusted && o.Trusted
			if i == 0 {
				st.Variants = slices.Clone(o.Variants)
				st.Parameters = slices.Clone(o.Parameters)
				st.APIVersions = slices.Clone(o.APIVersions)
				continue
			}
			st.Variants = slices.DeleteFunc(st.Variants, func(v string) bool { return !slices.Contains(o.Variants, v) })
			st.Parameters = slices.DeleteFunc(st.Parameters, func(p [2]string) bool { return !slices.Contains(o.Parameters, p) })
			st.APIVersions = slices.DeleteFunc(st.APIVersions, func(v int) bool { return !slices.Contains(o.APIVersions, v) })
		}
		if !st.Valid {
			// Ganeti reports nothing it could not use on every node.
			st.Variants, st.Parameters, st.APIVersions = nil, nil, nil
		}
		st.OSParams = map[string]config.Params{}
		st.OSHVParams = map[string]map[string]config.Params{}
		if c != nil {
			for _, key := range append([]string{name}, variantNames(name, st.Variants)...) {
				if p, ok := c.OSParams[key]; ok {
					st.OSParams[key] = p
				}
				if p, ok := c.OSHVParams[key]; ok {
					st.OSHVParams[key] = p
				}
			}
		}
		out = append(out, st)
	}
	return out
}

func variantNames(name string, variants []string) []string {
	out := make([]string, len(variants))
	for i, v := range variants {
		out[i] = name + "+" + v
	}
	return out
}

func osStrings(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func osPairs(l [][2]string) [][2]string {
	if l == nil {
		return [][2]string{}
	}
	return l
}

func osInts(l []int) []int {
	if l == nil {
		return []int{}
	}
	return l
}

// osField is one output field of an OS.
func osField(s *OSStatus, name string) any {
	switch name {
	case "name":
		return s.Name
	case "valid":
		return s.Valid
	case "variants":
		return osStrings(s.Variants)
	case "node_status":
		return s.NodeStatus
	case "hidden":
		return s.Hidden
	case "blacklisted":
		return s.Blacklisted
	case "api_versions":
		return osInts(s.APIVersions)
	case "parameters":
		return osPairs(s.Parameters)
	case "trusted":
		return s.Trusted
	case "os_hvp":
		return s.OSHVParams
	case "osparams":
		return s.OSParams
	}
	return nil
}

// osDiagnoseLU asks every vm_capable, online node for its OS definitions.
// As Ganeti's legacy OS query, hidden, blacklisted and invalid OSes are left
// out unless the respective field is asked for, so a caller listing names
// gets only what it may install.
type osDiagnoseLU struct {
	Rows [][]any `json:"rows"`
}

func (lu *osDiagnoseLU) Locks(p *Processor, op *opcodes.Op) []locking.Request { return nil }

func (lu *osDiagnoseLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	fields := op.Strings("output_fields")
	for _, f := range fields {
		if !slices.Contains(osFields, f) {
			return ecode.Errorf(ecode.Inval, "Unknown output fields selected: %s", f)
		}
	}
	perNode := map[string][]nodeapi.OSInfo{}
	for _, n := range p.Cfg.Nodes() {
		if n.Offline || !n.VMCapable {
			continue
		}
		var l []nodeapi.OSInfo
		if err := p.RPC.Call(ctx, n, nodeapi.OSDiagnose, "", struct{}{}, &l); err != nil {
			// As Ganeti: a node that cannot answer is left out of the merge.
			p.Log.Warn("os diagnose failed on a node", "node", n.Name, "err", err)
			continue
		}
		perNode[n.Name] = l
	}
	names := op.Strings("names")
	lu.Rows = [][]any{}
	for _, st := range MergeOS(perNode, p.Cfg.Cluster()) {
		if len(names) > 0 && !slices.Contains(names, st.Name) {
			continue
		}
		if (st.Hidden && !slices.Contains(fields, "hidden")) || (st.Blacklisted && !slices.Contains(fields, "blacklisted")) ||
			(!st.Valid && !slices.Contains(fields, "valid")) {
			continue
		}
		row := make([]any, len(fields))
		for i, f := range fields {
			row[i] = osField(&st, f)
		}
		lu.Rows = append(lu.Rows, row)
	}
	return nil
}

func (lu *osDiagnoseLU) Steps() []Step { return nil }
func (lu *osDiagnoseLU) Result() any   { return lu.Rows }
