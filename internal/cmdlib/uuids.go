package cmdlib

import (
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
)

// uuidParam pairs an opcode's name parameter with the uuid parameter
// Ganeti's clients may send next to it.
type uuidParam struct {
	name, uuid string
	node       bool // a node; otherwise an instance
}

// uuidParams lists, per opcode, the name/uuid pairs resolved before the
// opcode's logical unit sees it. OP_BACKUP_REMOVE is absent: it removes
// the exports of an instance that may no longer exist. Opcodes whose uuid
// lists Ganeti recomputes from the names (on_node_uuids, node_uuids) are
// absent too.
var uuidParams = map[string][]uuidParam{
	"OP_NODE_REMOVE":               {{"node_name", "node_uuid", true}},
	"OP_NODE_SET_PARAMS":           {{"node_name", "node_uuid", true}},
	"OP_INSTANCE_CREATE":           {{"pnode", "pnode_uuid", true}, {"snode", "snode_uuid", true}, {"src_node", "src_node_uuid", true}},
	"OP_INSTANCE_REMOVE":           {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_STARTUP":          {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_SHUTDOWN":         {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_REBOOT":           {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_REINSTALL":        {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_RENAME":           {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_SET_PARAMS":       {{"instance_name", "instance_uuid", false}, {"pnode", "pnode_uuid", true}},
	"OP_INSTANCE_ACTIVATE_DISKS":   {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_DEACTIVATE_DISKS": {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_GROW_DISK":        {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_CONSOLE":          {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_RECREATE_DISKS":   {{"instance_name", "instance_uuid", false}},
	"OP_INSTANCE_CHANGE_GROUP":     {{"instance_name", "instance_uuid", false}},
	"OP_BACKUP_PREPARE":            {{"instance_name", "instance_uuid", false}},
	"OP_BACKUP_EXPORT":             {{"instance_name", "instance_uuid", false}, {"target_node", "target_node_uuid", true}},
	"OP_INSTANCE_MIGRATE":          {{"instance_name", "instance_uuid", false}, {"target_node", "target_node_uuid", true}},
	"OP_INSTANCE_FAILOVER":         {{"instance_name", "instance_uuid", false}, {"target_node", "target_node_uuid", true}},
	"OP_INSTANCE_MOVE":             {{"instance_name", "instance_uuid", false}, {"target_node", "target_node_uuid", true}},
	"OP_NODE_MIGRATE":              {{"node_name", "node_uuid", true}, {"target_node", "target_node_uuid", true}},
	"OP_NODE_EVACUATE":             {{"node_name", "node_uuid", true}, {"remote_node", "remote_node_uuid", true}},
	"OP_NODE_MODIFY_STORAGE":       {{"node_name", "node_uuid", true}},
	"OP_REPAIR_NODE_STORAGE":       {{"node_name", "node_uuid", true}},
}

// resolveUUIDs honours the uuid parameters of op, as Ganeti's ExpandNames
// does: with a name, the object of that name must have that uuid (else
// ECODE_NOTUNIQUE: it changed since the job was submitted); without one,
// the object is found by its uuid and its name filled in for the logical
// unit. It runs unlocked, before the locks are computed from the names.
func (p *Processor) resolveUUIDs(op *opcodes.Op) error {
	for _, u := range uuidParams[op.ID] {
		uuid := op.Str(u.uuid)
		if uuid == "" {
			continue
		}
		name, isName := op.Params[u.name].(string)
		if !isName && op.Params[u.name] != nil {
			continue // a remote export's target_node is a list, not a node
		}
		kind, gotUUID, gotName, found := "Instance", "", "", false
		if u.node {
			kind = "Node"
		}
		lookup := name
		if name == "" {
			lookup = uuid
		}
		if u.node {
			var n *config.Node
			if n, found = p.Cfg.Node(lookup); found {
				gotUUID, gotName = n.UUID, n.Name
			}
		} else {
			var i *config.Instance
			if i, found = p.Cfg.Instance(lookup); found {
				gotUUID, gotName = i.UUID, i.Name
			}
		}
		switch {
		case name == "" && (!found || gotUUID != uuid):
			return ecode.Errorf(ecode.NoEnt, "%s with uuid '%s' (%s) not known", kind, uuid, u.uuid)
		case !found:
			return ecode.Errorf(ecode.NoEnt, "%s '%s' not known", kind, name)
		case gotUUID != uuid:
			return ecode.Errorf(ecode.NotUnique, "The %s uuid '%s' of '%s' does not match the expected uuid '%s' (%s); it may have changed since the job was submitted",
				lowerKind(kind), gotUUID, gotName, uuid, u.uuid)
		}
		op.Params[u.name] = gotName
	}
	return nil
}

func lowerKind(kind string) string {
	if kind == "Node" {
		return "node"
	}
	return "instance"
}
