#!/usr/bin/python3
"""Drives corral-rapi's /2/nodes/N/storage resources with Ganeti's own RAPI
client.

Usage: storage.py NODE STORAGE_TYPE FIELDS UNIT; connection settings come
from the environment as for client.py. Prints one JSON document: the
query job's status and result, and the modify and repair jobs' (which
Corral refuses) for UNIT of STORAGE_TYPE and for LVM.
"""

import json
import os
import sys

from ganeti.rapi import client


def connect():
    cfg = client.GenericCurlConfig(cafile=os.environ["RAPI_CA"], verify_hostname=True)
    return client.GanetiRapiClient(os.environ["RAPI_HOST"], port=int(os.environ["RAPI_PORT"]),
                                   username=os.environ["RAPI_USER"],
                                   password=os.environ["RAPI_PASSWORD"], curl_config_fn=cfg)


def wait(c, job):
    c.WaitForJobCompletion(job, period=0.2, retries=300)
    st = c.GetJobStatus(job)
    return {"job": job, "status": st["status"], "opresult": st["opresult"]}


def main():
    node, storage_type, fields, unit = sys.argv[1:]
    c = connect()
    out = {
        "query": wait(c, c.GetNodeStorageUnits(node, storage_type, fields)),
        "modify": wait(c, c.ModifyNodeStorageUnits(node, storage_type, unit, allocatable=False)),
        "modify_lvm": wait(c, c.ModifyNodeStorageUnits(node, "lvm-pv", "/dev/sdb1", allocatable=False)),
        "repair": wait(c, c.RepairNodeStorageUnits(node, storage_type, unit)),
        "repair_lvm": wait(c, c.RepairNodeStorageUnits(node, "lvm-vg", "xenvg")),
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
