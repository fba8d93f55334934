package ganetidropin

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/config"
)

// Hypervisors are the hypervisors Ganeti 3.0 knows; it writes an
// hvparams_<name> ssconf file for each, enabled or not.
var Hypervisors = []string{"chroot", "fake", "kvm", "lxc", "xen-hvm", "xen-pvm"}

// Keys are every ssconf key Ganeti 3.0 defines (constants.VALID_SS_KEYS,
// src/Ganeti/Ssconf.hs), hvparams_* included.
func Keys() []string {
	keys := []string{
		"cluster_name", "cluster_tags", "enabled_user_shutdown", "file_storage_dir", "gluster_storage_dir",
		"hypervisor_list", "instance_list", "maintain_node_health", "master_candidates", "master_candidates_certs",
		"master_candidates_ips", "master_ip", "master_netdev", "master_netmask", "master_node", "networks",
		"node_list", "node_primary_ips", "node_secondary_ips", "node_vm_capable", "nodegroups", "offline_nodes",
		"online_nodes", "primary_ip_family", "release_version", "shared_file_storage_dir", "ssh_ports", "uid_pool",
	}
	for _, h := range Hypervisors {
		keys = append(keys, "hvparams_"+h)
	}
	slices.Sort(keys)
	return keys
}

// Snapshot is the part of the configuration the ssconf files show.
type Snapshot struct {
	Cluster   *config.Cluster
	Nodes     []*config.Node
	Groups    []*config.NodeGroup
	Instances []*config.Instance
	Networks  []*config.Network
	// MasterIP is the cluster's master address as QueryClusterInfo
	// reports it.
	MasterIP string
	// Release is the software version the cluster reports.
	Release string
}

// defaultSSHPort is Ganeti's default ndparams ssh_port.
const defaultSSHPort = 22

// Values computes the content of every ssconf file from s, in the format
// Ganeti's writer uses (lib/ssconf.py WriteFiles): one value per line,
// a final newline unless the file is empty.
func Values(s Snapshot) map[string]string {
	c := s.Cluster
	nodes := slices.Clone(s.Nodes)
	slices.SortFunc(nodes, func(a, b *config.Node) int { return NiceCompare(a.Name, b.Name) })
	groups := slices.Clone(s.Groups)
	slices.SortFunc(groups, func(a, b *config.NodeGroup) int { return NiceCompare(a.Name, b.Name) })
	groupByUUID := make(map[string]*config.NodeGroup, len(groups))
	for _, g := range groups {
		groupByUUID[g.UUID] = g
	}
	master := "NO MASTER"
	var names, primary, secondary, vmCapable, offline, online, mcs, mcIPs, sshPorts []string
	for _, n := range nodes {
		names = append(names, n.Name)
		primary = append(primary, n.Name+" "+n.PrimaryIP)
		secondary = append(secondary, n.Name+" "+n.SecondaryIP)
		vmCapable = append(vmCapable, n.Name+"="+pyBool(n.VMCapable))
		if n.Offline {
			offline = append(offline, n.Name)
		} else {
			online = append(online, n.Name)
		}
		isMaster := n.UUID == c.MasterNode
		if isMaster {
			master = n.Name
		}
		if n.MasterCandidate || isMaster {
			mcs = append(mcs, n.Name)
			mcIPs = append(mcIPs, n.PrimaryIP)
		}
		sshPorts = append(sshPorts, n.Name+"="+sshPort(c, groupByUUID[n.Group], n))
	}
	var insts []string
	for _, i := range s.Instances {
		insts = append(insts, i.Name)
	}
	slices.SortFunc(insts, NiceCompare)
	var groupLines []string
	for _, g := range groups {
		groupLines = append(groupLines, g.UUID+" "+g.Name)
	}
	var netLines []string
	for _, n := range s.Networks {
		netLines = append(netLines, n.UUID+" "+n.Name)
	}
	slices.Sort(netLines)
	var uidPool []string
	for _, r := range c.UIDPool {
		if r[0] == r[1] {
			uidPool = append(uidPool, strconv.FormatUint(uint64(r[0]), 10))
		} else {
			uidPool = append(uidPool, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
	}
	v := map[string][]string{
		"cluster_name":            {c.ClusterName},
		"cluster_tags":            slices.Sorted(slices.Values(c.Tags)),
		"file_storage_dir":        {c.FileStorageDir},
		"shared_file_storage_dir": {""},
		"gluster_storage_dir":     {""},
		"master_candidates":       mcs,
		"master_candidates_ips":   mcIPs,
		// Ganeti lists each candidate's certificate digest here, for its
		// node daemons' mutual authentication; Corral's nodes trust the
		// cluster CA instead, so there is none to list.
		"master_candidates_certs": nil,
		"master_ip":               {s.MasterIP},
		"master_netdev":           {c.MasterNetdev},
		"master_netmask":          {strconv.Itoa(c.MasterIPNetmask())},
		"master_node":             {master},
		"node_list":               names,
		"node_primary_ips":        primary,
		"node_secondary_ips":      secondary,
		"node_vm_capable":         vmCapable,
		"offline_nodes":           offline,
		"online_nodes":            online,
		"primary_ip_family":       {"2"}, // AF_INET: Corral's nodes have IPv4 primaries
		"instance_list":           insts,
		"release_version":         {s.Release},
		"hypervisor_list":         c.EnabledHypervisors,
		"maintain_node_health":    {"False"},
		"uid_pool":                uidPool,
		"nodegroups":              groupLines,
		"networks":                netLines,
		"enabled_user_shutdown":   {"False"},
		"ssh_ports":               sshPorts,
	}
	for _, h := range Hypervisors {
		v["hvparams_"+h] = hvparamLines(c.HVParams[h])
	}
	out := make(map[string]string, len(v))
	for k, lines := range v {
		out[k] = fileContent(lines)
	}
	return out
}

// fileContent joins lines as Ganeti's writer does.
func fileContent(lines []string) string {
	s := strings.Join(lines, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// sshPort is the node's effective ndparams ssh_port: the node's own value,
// else its group's, else the cluster's, else Ganeti's default.
func sshPort(c *config.Cluster, g *config.NodeGroup, n *config.Node) string {
	layers := []config.Params{n.NDParams}
	if g != nil {
		layers = append(layers, g.NDParams)
	}
	layers = append(layers, c.NDParams)
	for _, p := range layers {
		if v, ok := p["ssh_port"]; ok && v != nil {
			return hvparamValue(v)
		}
	}
	return strconv.Itoa(defaultSSHPort)
}

// hvparamLines renders hypervisor parameters as Ganeti does: key=value,
// sorted by key.
func hvparamLines(p config.Params) []string {
	keys := slices.Sorted(maps.Keys(p))
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, k+"="+hvparamValue(p[k]))
	}
	return lines
}

// hvparamValue prints a parameter value as Ganeti's ssconf writer does:
// strings and numbers bare, booleans as True/False, anything else as JSON.
func hvparamValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return pyBool(x)
	case float64, int, int64, json.Number:
		return config.ParamString(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// NiceCompare orders names as Ganeti's NiceSort does: runs of digits
// compare as numbers, the rest as text, so node2 sorts before node10.
// Names equal that way ("node01", "node1") are ordered as text.
func NiceCompare(a, b string) int {
	if c := niceCompare(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func niceCompare(a, b string) int {
	for a != "" && b != "" {
		ca, ra := nextChunk(a)
		cb, rb := nextChunk(b)
		da, db := isDigit(ca[0]), isDigit(cb[0])
		switch {
		case da && db:
			na, nb := strings.TrimLeft(ca, "0"), strings.TrimLeft(cb, "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
		case da != db:
			// Ganeti compares a number with text as Python 2 did: numbers
			// first.
			if da {
				return -1
			}
			return 1
		default:
			if c := strings.Compare(ca, cb); c != 0 {
				return c
			}
		}
		a, b = ra, rb
	}
	return len(a) - len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// nextChunk splits off the leading run of digits or of non-digits.
func nextChunk(s string) (chunk, rest string) {
	d := isDigit(s[0])
	i := 1
	for i < len(s) && isDigit(s[i]) == d {
		i++
	}
	return s[:i], s[i:]
}
