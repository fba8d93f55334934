package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// fakeGroups gives the fake master node groups: QueryGroups and the
// OP_GROUP_* jobs, with Ganeti's rules and messages for the cases the
// scripts exercise. Its state is guarded by the fake's mutex.
type fakeGroups struct {
	groups map[string]map[string]any // name -> alloc_policy, ndparams, uuid
	nextID int
}

// addGroups installs the node group support on f: every node starts in
// "default".
func (f *fakeMaster) addGroups() {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := &fakeGroups{groups: map[string]map[string]any{}, nextID: 1}
	g.put("default", "preferred")
	for _, n := range f.nodes {
		n["group"] = "default"
	}
	f.handle["QueryGroups"] = func(_ context.Context, args []any) (any, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return g.rows(f, strs(argAt(args, 0)), strs(argAt(args, 1)))
	}
	prev := f.outcome
	f.outcome = func(op map[string]any) jobOutcome {
		if id, _ := op["OP_ID"].(string); strings.HasPrefix(id, "OP_GROUP_") {
			return g.run(f, op)
		}
		if prev != nil {
			return prev(op)
		}
		return f.defaultOutcome(op)
	}
}

func (g *fakeGroups) put(name, policy string) {
	g.groups[name] = map[string]any{"alloc_policy": policy, "ndparams": map[string]any{},
		"uuid": fmt.Sprintf("uuid-%d", g.nextID), "serial_no": 1.0}
	g.nextID++
}

func (g *fakeGroups) members(f *fakeMaster, name string) []any {
	out := []any{}
	for _, n := range slices.Sorted(maps.Keys(f.nodes)) {
		if f.nodes[n]["group"] == name {
			out = append(out, n)
		}
	}
	return out
}

func (g *fakeGroups) rows(f *fakeMaster, names, fields []string) (any, error) {
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(g.groups))
	}
	rows := []any{}
	for _, n := range names {
		grp, ok := g.groups[n]
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "Node group '%s' not known", n)
		}
		row := []any{}
		for _, fl := range fields {
			switch fl {
			case "name":
				row = append(row, n)
			case "node_cnt":
				row = append(row, float64(len(g.members(f, n))))
			case "node_list":
				row = append(row, g.members(f, n))
			case "pinst_cnt":
				row = append(row, 0.0)
			case "diskparams", "ipolicy":
				row = append(row, map[string]any{})
			case "tags":
				row = append(row, []any{})
			case "ctime", "mtime":
				row = append(row, float64(fakeEpoch))
			default:
				row = append(row, grp[fl])
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (g *fakeGroups) run(f *fakeMaster, op map[string]any) jobOutcome {
	id, _ := op["OP_ID"].(string)
	name, _ := op["group_name"].(string)
	fail := func(c ecode.Class, format string, args ...any) jobOutcome {
		return jobOutcome{status: "error", result: encErr(ecode.OpPrereqError, c, fmt.Sprintf(format, args...))}
	}
	grp, exists := g.groups[name]
	if !exists && id != "OP_GROUP_ADD" {
		return fail(ecode.NoEnt, "Node group '%s' not known", name)
	}
	policy := func() (string, bool) {
		p, given := op["alloc_policy"].(string)
		return p, !given || p == "preferred" || p == "last_resort" || p == "unallocable"
	}
	dry := op["dry_run"] == true
	ok := jobOutcome{status: "success"}
	switch id {
	case "OP_GROUP_ADD":
		if exists {
			return fail(ecode.Exists, "Desired group name '%s' already exists as a node group", name)
		}
		p, valid := policy()
		if !valid {
			return fail(ecode.Inval, "Invalid allocation policy '%s'", p)
		}
		if p == "" {
			p = "preferred"
		}
		if !dry {
			g.put(name, p)
			if nd, isMap := op["ndparams"].(map[string]any); isMap {
				g.groups[name]["ndparams"] = nd
			}
		}
		ok.logs = []any{"Adding node group " + name}
	case "OP_GROUP_REMOVE":
		if m := g.members(f, name); len(m) > 0 {
			var names []string
			for _, n := range m {
				names = append(names, n.(string))
			}
			return fail(ecode.State, "Group '%s' not empty, has the following nodes: %s", name, strings.Join(names, ", "))
		}
		if !dry {
			delete(g.groups, name)
		}
	case "OP_GROUP_RENAME":
		to, _ := op["new_name"].(string)
		if _, clash := g.groups[to]; clash {
			return fail(ecode.Exists, "Desired new name '%s' clashes with existing node group", to)
		}
		if !dry {
			delete(g.groups, name)
			g.groups[to] = grp
			for _, n := range f.nodes {
				if n["group"] == name {
					n["group"] = to
				}
			}
		}
		ok.result = to
	case "OP_GROUP_SET_PARAMS":
		p, valid := policy()
		if !valid {
			return fail(ecode.Inval, "Invalid allocation policy '%s'", p)
		}
		ch := []any{}
		if p != "" {
			ch = append(ch, []any{"alloc_policy", p})
			if !dry {
				grp["alloc_policy"] = p
			}
		}
		if nd, isMap := op["ndparams"].(map[string]any); isMap {
			cur := maps.Clone(grp["ndparams"].(map[string]any))
			for k, v := range nd {
				if v == "default" {
					delete(cur, k)
				} else {
					cur[k] = v
				}
			}
			ch = append(ch, []any{"ndparams", fmt.Sprint(cur)})
			if !dry {
				grp["ndparams"] = cur
			}
		}
		ok.result = ch
	case "OP_GROUP_ASSIGN_NODES":
		for _, n := range strs(op["nodes"]) {
			if _, known := f.nodes[n]; !known {
				return fail(ecode.NoEnt, "Node '%s' not known", n)
			}
		}
		for _, n := range strs(op["nodes"]) {
			if !dry && f.nodes[n]["group"] != name {
				ok.logs = append(ok.logs, fmt.Sprintf("Moving node %s to group %s", n, name))
				f.nodes[n]["group"] = name
			}
		}
	}
	return ok
}
