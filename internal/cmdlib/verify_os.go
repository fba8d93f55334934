package cmdlib

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/corral/corral/internal/nodeapi"
)

// verifyOS compares the OS definitions of every online, vm_capable node
// with those of a reference node (the master when it can run instances),
// as Ganeti's cluster verify does (ENODEOS): invalid definitions, OSes
// only on one side, and differing API versions, variants, parameters,
// trust or os_version.
func (lu *clusterVerifyLU) verifyOS(ctx context.Context, p *Processor) {
	lists := map[string]map[string]nodeapi.OSInfo{}
	var names []string
	for _, n := range p.Cfg.Nodes() {
		if n.Offline || !n.VMCapable {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var l []nodeapi.OSInfo
		err := p.RPC.Call(cctx, n, nodeapi.OSDiagnose, "", struct{}{}, &l)
		cancel()
		if err != nil {
			lu.errf("node %s: node hasn't returned valid OS data: %v", n.Name, err)
			continue
		}
		byName := map[string]nodeapi.OSInfo{}
		for _, o := range l {
			if _, seen := byName[o.Name]; !seen {
				byName[o.Name] = o
			}
		}
		lists[n.Name] = byName
		names = append(names, n.Name)
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	ref := names[0]
	if m, ok := p.Cfg.Node(p.Cfg.Cluster().MasterNode); ok && lists[m.Name] != nil {
		ref = m.Name
	}
	base := lists[ref]
	for _, node := range names {
		lu.compareNodeOS(node, lists[node], ref, base)
	}
}

// compareNodeOS reports how one node's OS list differs from the reference.
func (lu *clusterVerifyLU) compareNodeOS(node string, oses map[string]nodeapi.OSInfo, ref string, base map[string]nodeapi.OSInfo) {
	for _, name := range slices.Sorted(maps.Keys(oses)) {
		o := oses[name]
		if !o.Valid {
			lu.errf("node %s: Invalid OS %s (located at %s): %s", node, name, o.Path, o.Error)
		}
		b, ok := base[name]
		if !ok {
			lu.errf("node %s: Extra OS %s not present on reference node (%s)", node, name, ref)
			continue
		}
		if !b.Valid || node == ref {
			continue
		}
		for _, d := range []struct {
			kind string
			a, b []string
		}{
			{"API version", intStrings(o.APIVersions), intStrings(b.APIVersions)},
			{"variants list", o.Variants, b.Variants},
			{"parameters", paramStrings(o.Parameters), paramStrings(b.Parameters)},
		} {
			a, bb := sortedSet(d.a), sortedSet(d.b)
			if !slices.Equal(a, bb) {
				lu.errf("node %s: OS %s for %s differs from reference node %s: [%s] vs. [%s]", node, d.kind, name, ref, strings.Join(a, ", "), strings.Join(bb, ", "))
			}
		}
		if o.Trusted != b.Trusted {
			lu.errf("node %s: OS trusted for %s differs from reference node %s: %t vs. %t", node, name, ref, o.Trusted, b.Trusted)
		}
		if o.Version != b.Version {
			lu.errf("node %s: OS version for %s differs from reference node %s: %s vs. %s", node, name, ref, quoteEmpty(o.Version), quoteEmpty(b.Version))
		}
	}
	var missing []string
	for name := range base {
		if _, ok := oses[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		lu.errf("node %s: OSes present on reference node %s but missing on this node: %s", node, ref, strings.Join(missing, ", "))
	}
}

// verifyInstancePolicies warns about instances outside their group's
// instance policy (Ganeti's EINSTANCEPOLICY, a warning).
func (lu *clusterVerifyLU) verifyInstancePolicies(p *Processor) {
	c := p.Cfg.Cluster()
	for _, i := range p.Cfg.Instances() {
		n, ok := p.Cfg.Node(i.PrimaryNode)
		if !ok {
			continue
		}
		if v := p.nodePolicy(n).violations(instanceFullSpecs(c, i)); len(v) > 0 {
			lu.warnf("instance %s: %s", i.Name, strings.Join(v, ", "))
		}
	}
}

func intStrings(l []int) []string {
	out := make([]string, len(l))
	for i, v := range l {
		out[i] = fmt.Sprint(v)
	}
	return out
}

func paramStrings(l [][2]string) []string {
	out := make([]string, len(l))
	for i, p := range l {
		out[i] = p[0] + ": " + p[1]
	}
	return out
}

func sortedSet(l []string) []string {
	out := slices.Clone(l)
	sort.Strings(out)
	return slices.Compact(out)
}

func quoteEmpty(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
