package confdb

import (
	"strconv"
	"strings"

	"github.com/corral/corral/internal/config"
)

// reset empties the cache: one collection per kind of object, with its
// key prefixes, how its names compare (names.go) and its unique indexes.
// A new kind of object is one more collection here and in DB.
func (db *DB) reset() {
	db.nodes = newCollection(pfxNode, pfxNameNode, foldName, func() *config.Node { return new(config.Node) })
	db.groups = newCollection(pfxGroup, pfxNameGroup, keepName, func() *config.NodeGroup { return new(config.NodeGroup) })
	db.instMACs = newUniqueIndex(pfxMAC, nicCount, nicMAC)
	db.instPorts = newUniqueIndex(pfxNetPort, netPortCount, netPort)
	db.instances = newCollection(pfxInstance, pfxNameInst, foldName, func() *config.Instance { return new(config.Instance) }, db.instMACs, db.instPorts)
	db.machines = newCollection(pfxMachine, pfxNameMachine, keepName, func() *config.Machine { return new(config.Machine) })
	db.portMACs = newUniqueIndex(pfxPortMAC, one[*config.MachinePort], portMAC)
	db.ports = newCollection(pfxPort, pfxNamePort, keepName, func() *config.MachinePort { return new(config.MachinePort) }, db.portMACs)
	db.networks = newCollection(pfxNetwork, pfxNameNetwork, keepName, func() *config.Network { return new(config.Network) })
	db.coe = newCOECollections()
	db.kinds = map[string]loader{
		kindOf(pfxNode):     db.nodes,
		kindOf(pfxGroup):    db.groups,
		kindOf(pfxInstance): db.instances,
		kindOf(pfxMachine):  db.machines,
		kindOf(pfxPort):     db.ports,
		kindOf(pfxNetwork):  db.networks,
		kindOf(pfxStatus): statusLoader{
			kindOf(pfxNode):         db.nodes,
			kindOf(pfxInstance):     db.instances,
			kindOf(pfxMachine):      db.machines,
			kindOf(pfxCOECluster):   db.coe.clusters,
			kindOf(pfxCOENodeGroup): db.coe.nodeGroups,
		},
	}
	db.coe.register(db.kinds)
}

// kindOf is the key segment after Prefix that names a kind of object.
func kindOf(pfx string) string { return strings.TrimSuffix(strings.TrimPrefix(pfx, Prefix), "/") }

// nicCount and nicMAC give an instance's MACs as stored (lower case).
func nicCount(i *config.Instance) int         { return len(i.NICs) }
func nicMAC(i *config.Instance, k int) string { return i.NICs[k].MAC }

// An instance has at most one network port; 0 means none.
func netPortCount(i *config.Instance) int {
	if i.NetworkPort > 0 {
		return 1
	}
	return 0
}
func netPort(i *config.Instance, _ int) string { return strconv.Itoa(i.NetworkPort) }

// A port has one MAC, stored in lower case.
func one[T any](T) int                            { return 1 }
func portMAC(p *config.MachinePort, _ int) string { return p.Address }
