#!/usr/bin/python3
"""Writes ganeti30_opcodes.json from Ganeti 3.0's own opcode classes.

Run with the system python3 on a machine with Debian's ganeti 3.0 installed:

    /usr/bin/python3 ganeti30_opcodes.py > ganeti30_opcodes.json

The output holds, for every Ganeti 3.0 opcode, its parameters (name,
default, type description, whether it is required), and for the opcodes
Corral implements two dicts as Ganeti's Python client sends them over LUXI
(OpCode.__getstate__): "minimal", with only the values a caller must give,
and "full", after Ganeti's own validation filled in every default (what a
client that sets every parameter sends).
"""

import json
import sys

sys.path.insert(0, "/usr/share/ganeti/3.0")

from ganeti import opcodes  # noqa: E402

# Values for the parameters a caller must give, per opcode Corral
# implements. Everything else comes from Ganeti's defaults.
REQUIRED = {
    "OP_TEST_DELAY": {"duration": 1.5},
    "OP_CLUSTER_VERIFY": {},
    "OP_CLUSTER_SET_PARAMS": {},
    "OP_CLUSTER_DESTROY": {},
    "OP_CLUSTER_RENEW_CRYPTO": {},
    "OP_CLUSTER_ACTIVATE_MASTER_IP": {},
    "OP_CLUSTER_DEACTIVATE_MASTER_IP": {},
    "OP_NODE_ADD": {"node_name": "node2.example.com"},
    "OP_NODE_REMOVE": {"node_name": "node2.example.com"},
    "OP_NODE_SET_PARAMS": {"node_name": "node2.example.com"},
    "OP_INSTANCE_CREATE": {"instance_name": "web1.example.com", "mode": "create",
                           "disks": [{"size": 1024}], "nics": [{}],
                           "os_type": "noop"},
    "OP_INSTANCE_REMOVE": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_STARTUP": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_SHUTDOWN": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_REBOOT": {"instance_name": "web1.example.com",
                           "reboot_type": "soft"},
    "OP_INSTANCE_REINSTALL": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_RENAME": {"instance_name": "web1.example.com",
                           "new_name": "web2.example.com"},
    "OP_INSTANCE_SET_PARAMS": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_QUERY_DATA": {},
    "OP_INSTANCE_ACTIVATE_DISKS": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_DEACTIVATE_DISKS": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_GROW_DISK": {"instance_name": "web1.example.com", "disk": 0,
                              "amount": 512},
    "OP_INSTANCE_CONSOLE": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_MIGRATE": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_FAILOVER": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_MOVE": {"instance_name": "web1.example.com",
                         "target_node": "node2.example.com"},
    "OP_GROUP_ADD": {"group_name": "rack2"},
    "OP_GROUP_REMOVE": {"group_name": "rack2"},
    "OP_GROUP_SET_PARAMS": {"group_name": "rack2"},
    "OP_GROUP_RENAME": {"group_name": "rack2", "new_name": "rack3"},
    "OP_GROUP_ASSIGN_NODES": {"group_name": "rack2",
                              "nodes": ["node2.example.com"]},
    "OP_OS_DIAGNOSE": {"output_fields": ["name", "valid"]},
    "OP_TAGS_GET": {"kind": "instance", "name": "web1.example.com"},
    "OP_TAGS_SET": {"kind": "instance", "name": "web1.example.com",
                    "tags": ["a"]},
    "OP_TAGS_DEL": {"kind": "instance", "name": "web1.example.com",
                    "tags": ["a"]},
    "OP_TAGS_SEARCH": {"pattern": "^a$"},
    "OP_BACKUP_PREPARE": {"instance_name": "web1.example.com",
                          "mode": "local"},
    "OP_BACKUP_EXPORT": {"instance_name": "web1.example.com",
                         "target_node": "node2.example.com"},
    "OP_BACKUP_REMOVE": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_MIGRATE": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_FAILOVER": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_MOVE": {"instance_name": "web1.example.com",
                         "target_node": "node2.example.com"},
    "OP_NODE_MIGRATE": {"node_name": "node2.example.com"},
    "OP_NODE_EVACUATE": {"node_name": "node2.example.com",
                         "mode": "primary-only"},
    "OP_GROUP_EVACUATE": {"group_name": "rack2"},
    "OP_INSTANCE_RECREATE_DISKS": {"instance_name": "web1.example.com"},
    "OP_INSTANCE_CHANGE_GROUP": {"instance_name": "web1.example.com"},
    "OP_CLUSTER_VERIFY_DISKS": {},
    "OP_GROUP_VERIFY_DISKS": {"group_name": "rack2"},
    "OP_CLUSTER_REPAIR_DISK_SIZES": {},
    "OP_CLUSTER_REDIST_CONF": {},
    "OP_CLUSTER_RENAME": {"name": "cluster2.example.com"},
    "OP_NODE_POWERCYCLE": {"node_name": "node2.example.com"},
    "OP_NETWORK_ADD": {"network_name": "net1", "network": "192.0.2.0/24"},
    "OP_NETWORK_REMOVE": {"network_name": "net1"},
    "OP_NETWORK_SET_PARAMS": {"network_name": "net1"},
    "OP_NETWORK_CONNECT": {"network_name": "net1", "group_name": "rack2",
                           "network_mode": "bridged",
                           "network_link": "br0"},
    "OP_NETWORK_DISCONNECT": {"network_name": "net1", "group_name": "rack2"},
    "OP_OOB_COMMAND": {"node_names": ["node2.example.com"],
                       "command": "power-status"},
    "OP_NODE_QUERY_STORAGE": {"output_fields": ["name", "size", "free"],
                              "storage_type": "file"},
    "OP_NODE_MODIFY_STORAGE": {"node_name": "node2.example.com",
                               "storage_type": "lvm-pv",
                               "name": "/dev/sda1",
                               "changes": {"allocatable": False}},
    "OP_REPAIR_NODE_STORAGE": {"node_name": "node2.example.com",
                               "storage_type": "lvm-vg",
                               "name": "xenvg"},
    # A callable value is called for each dict: nested opcodes are
    # changed in place by Validate, so each dict gets its own.
    "OP_INSTANCE_MULTI_ALLOC": {"instances": lambda: [
        opcodes.OpInstanceCreate(instance_name="web%d.example.com" % i,
                                 mode="create", disks=[{"size": 1024}],
                                 nics=[{}], os_type="noop")
        for i in (1, 2)]},
}


def required_values(op_id):
  """The values of REQUIRED[op_id], callables called."""
  return dict((k, v() if callable(v) else v)
              for k, v in REQUIRED[op_id].items())


def jsonable(value):
  """Ganeti's defaults as JSON (sets become lists, tuples lists)."""
  if isinstance(value, (set, frozenset)):
    return sorted(jsonable(v) for v in value)
  if isinstance(value, (list, tuple)):
    return [jsonable(v) for v in value]
  if isinstance(value, dict):
    return dict((k, jsonable(v)) for k, v in value.items())
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  return repr(value)


def main():
  out = {"ganeti": "3.0", "opcodes": {}, "client_dicts": {}}
  for op_id, cls in sorted(opcodes.OP_MAPPING.items()):
    params = []
    for (name, default, test, _) in cls.GetAllParams():
      required = default is None and not test(None)
      params.append({"name": name, "default": jsonable(default),
                     "type": str(test), "required": required})
    out["opcodes"][op_id] = params
    if op_id not in REQUIRED:
      continue
    minimal = cls(**required_values(op_id))
    minimal.Validate(False)
    full = cls(**required_values(op_id))
    full.Validate(True)
    out["client_dicts"][op_id] = {
        "minimal": jsonable(minimal.__getstate__()),
        "full": jsonable(full.__getstate__()),
    }
  missing = set(REQUIRED) - set(opcodes.OP_MAPPING)
  if missing:
    raise SystemExit("not Ganeti 3.0 opcodes: %s" % sorted(missing))
  json.dump(out, sys.stdout, indent=1, sort_keys=True)
  sys.stdout.write("\n")


if __name__ == "__main__":
  main()
