#!/usr/bin/python3
"""Allocates instances through corral-rapi's /2/instances-multi-alloc with
Ganeti's own RAPI client.

Usage: multialloc.py [--dry-run] NAME...; connection settings come from
the environment as for client.py. Every instance is a stopped diskless
fake instance; NAME may end in ":MiB" to ask for that much memory. It
prints one JSON document: the multi-alloc job's status and result, and
the status of each job it submitted.
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
    c.WaitForJobCompletion(job, period=0.2, retries=600)
    return c.GetJobStatus(job)


def main():
    args = sys.argv[1:]
    dry_run = bool(args) and args[0] == "--dry-run"
    if dry_run:
        args = args[1:]
    c = connect()
    allocs = []
    for arg in args:
        name, _, mem = arg.partition(":")
        allocs.append(c.InstanceAllocation("create", name, "diskless", [], [{}],
                                           os="tiny+default", hypervisor="fake",
                                           start=False,
                                           beparams={"memory": int(mem or 128)}))
    job = c.InstancesMultiAlloc(allocs, dry_run=dry_run)
    st = wait(c, job)
    out = {"job": job, "status": st["status"], "opresult": st["opresult"], "children": {}}
    if st["status"] == "success":
        for ok, child in st["opresult"][0]["jobs"]:
            out["children"][str(child)] = wait(c, child)["status"]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
