#!/usr/bin/python3
"""Drives corral-rapi with Ganeti's own RAPI client library.

Usage: client.py STEP [ARG...]; connection settings come from the
environment (RAPI_PORT, RAPI_CA, RAPI_USER, RAPI_PASSWORD). Each step prints
one JSON document on stdout; the Go test checks the effects over LUXI.
"""

import json
import os
import sys

from ganeti.rapi import client


def connect(user=None, password=None, anonymous=False):
    cfg = client.GenericCurlConfig(cafile=os.environ["RAPI_CA"], verify_hostname=True)
    if not anonymous:
        user = user if user is not None else os.environ["RAPI_USER"]
        password = password if password is not None else os.environ["RAPI_PASSWORD"]
    return client.GanetiRapiClient(os.environ["RAPI_HOST"], port=int(os.environ["RAPI_PORT"]),
                                   username=user, password=password, curl_config_fn=cfg)


def api_error(fn):
    """Runs fn and returns the GanetiApiError's code and message."""
    try:
        fn()
    except client.GanetiApiError as err:
        return {"code": err.code, "message": str(err)}
    return {"code": None}


def wait(c, job):
    ok = c.WaitForJobCompletion(job, period=0.2, retries=300)
    return {"job": job, "ok": ok, "status": c.GetJobStatus(job)["status"]}


def tags_step(c, inst, node, group):
    """Adds, reads and removes tags of every kind; returns what it saw."""
    out = {
        "add_instance": wait(c, c.AddInstanceTags(inst, ["role:web", "env:prod"])),
        "instance_tags": sorted(c.GetInstanceTags(inst)),
        "instance_field": sorted(c.GetInstance(inst)["tags"]),
        "dry_run": wait(c, c.AddInstanceTags(inst, ["dry"], dry_run=True)),
        "after_dry_run": sorted(c.GetInstanceTags(inst)),
        "delete_instance": wait(c, c.DeleteInstanceTags(inst, ["env:prod"])),
        "after_delete": sorted(c.GetInstanceTags(inst)),
        "delete_missing": wait(c, c.DeleteInstanceTags(inst, ["nope"])),
        "add_node": wait(c, c.AddNodeTags(node, ["rack:4"])),
        "node_tags": c.GetNodeTags(node),
        "add_cluster": wait(c, c.AddClusterTags(["site:ams"])),
        "cluster_tags": c.GetClusterTags(),
        "add_group": wait(c, c.AddGroupTags(group, ["tier:1"])),
        "group_tags": c.GetGroupTags(group),
        "bad_tag": api_error(lambda: c.AddInstanceTags(inst, ["bad tag"])),
    }
    out["after_bad_tag"] = sorted(c.GetInstanceTags(inst))
    return out


def disks_step(c, inst):
    """Lists OSes, activates, grows and deactivates the disks of a running
    instance and reads its console; returns what it saw."""
    out = {"os": c.GetOperatingSystems()}
    job = c.ActivateInstanceDisks(inst)
    out["activate"] = wait(c, job)
    out["activate_result"] = c.GetJobStatus(job)["opresult"]
    out["grow"] = wait(c, c.GrowInstanceDisk(inst, 0, 64, wait_for_sync=False))
    out["sizes"] = c.GetInstance(inst)["disk.sizes"]
    out["console"] = c.GetInstanceConsole(inst)
    out["deactivate_running"] = wait(c, c.DeactivateInstanceDisks(inst))
    out["deactivate_forced"] = wait(c, c.DeactivateInstanceDisks(inst, force=True))
    out["shutdown"] = wait(c, c.ShutdownInstance(inst, timeout=0))
    out["console_stopped"] = api_error(lambda: c.GetInstanceConsole(inst))
    out["deactivate_stopped"] = wait(c, c.DeactivateInstanceDisks(inst))
    return out


def devices_step(c, inst):
    """Adds, changes and removes a disk and a NIC of a stopped instance
    with ModifyInstance, then asks for hotplug on the running one."""
    out = {}
    out["add"] = wait(c, c.ModifyInstance(
        inst, disks=[["add", -1, {"size": 32, "name": "data"}]],
        nics=[["add", -1, {}]]))
    i = c.GetInstance(inst)
    out["after_add"] = {"sizes": i["disk.sizes"], "names": i["disk.names"],
                        "macs": i["nic.macs"]}
    job = c.ModifyInstance(inst, disks=[["modify", "data", {"mode": "ro"}]])
    out["modify"] = wait(c, job)
    out["modify_result"] = c.GetJobStatus(job)["opresult"]
    out["remove"] = wait(c, c.ModifyInstance(
        inst, disks=[["remove", 1, {}]], nics=[["remove", -1, {}]]))
    i = c.GetInstance(inst)
    out["after_remove"] = {"sizes": i["disk.sizes"], "macs": i["nic.macs"]}
    out["startup"] = wait(c, c.StartupInstance(inst))
    job = c.ModifyInstance(inst, hotplug=True, nics=[["add", -1, {}]])
    out["hotplug"] = wait(c, job)
    out["hotplug_error"] = c.GetJobStatus(job)["opresult"]
    out["hotplug_if_possible"] = wait(c, c.ModifyInstance(
        inst, hotplug_if_possible=True, nics=[["add", -1, {}]]))
    out["nic_count"] = len(c.GetInstance(inst)["nic.macs"])
    return out


def groups(c, args):
    """Node group steps: groups ACTION ARG...; each prints what it saw."""
    action, args = args[0], args[1:]
    if action == "create":
        name, policy = args
        out = wait(c, c.CreateGroup(name, alloc_policy=policy))
        out["dry"] = wait(c, c.CreateGroup(name + "-dry", dry_run=True))
    elif action == "read":
        name, node = args
        out = {
            "names": c.GetGroups(),
            "bulk": c.GetGroups(bulk=True),
            "group": c.GetGroup(name),
            "node": c.GetNode(node),
            "missing": api_error(lambda: c.GetGroup("no-such-group")),
        }
    elif action == "modify":
        out = wait(c, c.ModifyGroup(args[0], alloc_policy=args[1]))
    elif action == "rename":
        out = wait(c, c.RenameGroup(args[0], args[1]))
    elif action == "assign":
        out = wait(c, c.AssignGroupNodes(args[0], args[1:]))
    elif action == "delete":
        job = c.DeleteGroup(args[0])
        out = wait(c, job)
        out["job_info"] = c.GetJobStatus(job)
    else:
        sys.exit("unknown groups action " + action)
    return out


def main():
    step, args = sys.argv[1], sys.argv[2:]
    c = connect()
    out = None
    if step == "read":
        nodes = c.GetNodes()
        out = {
            "version": c.GetVersion(),
            "info": c.GetInfo(),
            "features": c.GetFeatures(),
            "os": api_error(c.GetOperatingSystems),
            "nodes": nodes,
            "nodes_bulk": c.GetNodes(bulk=True),
            "node": c.GetNode(nodes[0]),
        }
    elif step == "create":
        name, os_type, dry = args[0], args[1], args[2] == "1"
        job = c.CreateInstance("create", name, "file", [{"size": 64}], [],
                               os=os_type, hypervisor="fake",
                               beparams={"memory": 128}, dry_run=dry)
        out = wait(c, job)
        out["job_info"] = c.GetJobStatus(job)
    elif step == "private":
        # osparams_private and osparams_secret as a Ganeti operator passes
        # them; the job is then read by the write user and anonymously.
        name, private, secret = args
        job = c.CreateInstance("create", name, "file", [{"size": 64}], [],
                               os="tiny+default", hypervisor="fake",
                               beparams={"memory": 128}, dry_run=True,
                               osparams_private={"marker": private},
                               osparams_secret={"marker": secret})
        out = wait(c, job)
        out["writer"] = c.GetJobStatus(job)["ops"]
        out["anonymous"] = connect(anonymous=True).GetJobStatus(job)["ops"]
    elif step == "inspect":
        name = args[0]
        info_job = c.GetInstanceInfo(name, static=True)
        out = {
            "instance": c.GetInstance(name),
            "info": wait(c, info_job),
            "jobs": c.GetJobs(),
            "jobs_bulk": c.GetJobs(bulk=True),
            "query": c.Query("instance", ["name", "status", "oper_state"],
                             qfilter=["=", "name", name]),
            "fields": c.QueryFields("instance", ["name", "status"]),
            "missing": api_error(lambda: c.GetInstance("no-such-instance")),
        }
    elif step == "shutdown":
        out = wait(c, c.ShutdownInstance(args[0], timeout=0))
    elif step == "startup":
        out = wait(c, c.StartupInstance(args[0]))
    elif step == "reboot":
        out = wait(c, c.RebootInstance(args[0], reboot_type="hard"))
    elif step == "modify":
        out = wait(c, c.ModifyInstance(args[0], beparams={"vcpus": 2}))
    elif step == "reinstall":
        out = wait(c, c.ReinstallInstance(args[0], os=args[1]))
    elif step == "rename":
        out = wait(c, c.RenameInstance(args[0], args[1]))
    elif step == "role":
        node, role = args
        before = c.GetNodeRole(node)
        out = wait(c, c.SetNodeRole(node, role))
        out["before"] = before
        out["after"] = c.GetNodeRole(node)
    elif step == "watch":
        job = c.ShutdownInstance(args[0], dry_run=True)
        change = c.WaitForJobChange(job, ["status"], None, None)
        out = wait(c, job)
        out["change"] = change
    elif step == "cancel":
        job = int(args[0])
        out = {"result": c.CancelJob(job)}
        c.WaitForJobCompletion(job, period=0.2, retries=300)
        out["canceled"] = c.GetJobStatus(job)["status"]
        out["missing"] = api_error(lambda: c.GetJobStatus(999999))
    elif step == "delete":
        out = wait(c, c.DeleteInstance(args[0]))
    elif step == "denied":
        name = args[0]
        anon = connect(anonymous=True)
        bad = connect(password="wrong")
        reader = connect(user=os.environ["RAPI_READ_USER"],
                         password=os.environ["RAPI_READ_PASSWORD"])
        out = {
            "anonymous_write": api_error(lambda: anon.ShutdownInstance(name)),
            "bad_password": api_error(lambda: bad.GetInfo()),
            "reader_write": api_error(lambda: reader.ShutdownInstance(name)),
            "reader_read": reader.GetInstance(name)["name"],
        }
    elif step == "tags":
        out = tags_step(c, *args)
    elif step == "disks":
        out = disks_step(c, *args)
    elif step == "devices":
        out = devices_step(c, *args)
    elif step == "recreate":
        out = {"recreate": wait(c, c.RecreateInstanceDisks(args[0], disks=[0]))}
    elif step == "groups":
        out = groups(c, args)
    elif step == "powercycle":
        out = {"node": wait(c, c.PowercycleNode(args[0])),
               "master": wait(c, c.PowercycleNode(args[1]))}
    elif step == "redist":
        out = {"redist": wait(c, c.RedistributeConfig(reason="damaged ssconf"))}
    else:
        sys.exit("unknown step " + step)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
