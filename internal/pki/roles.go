package pki

import "slices"

// Which roles each kind of Corral peer accepts, decided here and nowhere
// else, so that a certificate made for one job (an etcd member's, a node
// daemon's, corral-rapi's) can never be used for another.

// NodeRPCCallerRoles are the roles a node daemon takes RPCs from: corrald's
// master certificate only. etcd members, node daemons, corral-rapi and
// administrators hold certificates of the same CA and none of them may
// drive a node daemon, which runs as root.
func NodeRPCCallerRoles() []Role { return []Role{RoleMaster} }

// MayCallNodeRPC reports whether a certificate of role r may call a node
// daemon's RPCs.
func MayCallNodeRPC(r Role) bool { return slices.Contains(NodeRPCCallerRoles(), r) }

// NodeDaemonRoles are the roles a node daemon's own certificate may carry,
// which corrald checks when it calls a node and which node certificate
// renewal keeps.
func NodeDaemonRoles() []Role { return []Role{RoleNode} }

// JoinServerRoles are the roles the master's join listener may present to
// a joining node.
func JoinServerRoles() []Role { return []Role{RoleMaster} }

// EtcdMemberRoles are the roles corrald accepts from an etcd member it
// connects to. RoleMasterCandidate is the role members were issued before
// RoleEtcdMember existed; it is accepted here only, so that a cluster's
// running members keep working, and no node RPC accepts it.
func EtcdMemberRoles() []Role { return []Role{RoleEtcdMember, RoleMasterCandidate} }
