#!/usr/bin/python3
"""Drives corral-rapi's /2/networks resources with Ganeti's own RAPI client.

Usage: networks.py STEP [ARG...]; connection settings come from the
environment as for client.py. Each step prints one JSON document.
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


def create_instance(c, name, network, ip):
    return wait(c, c.CreateInstance("create", name, "file", [{"size": 64}],
                                    [{"network": network, "ip": ip}],
                                    os="tiny+default", hypervisor="fake",
                                    beparams={"memory": 128}))


def main():
    step, args = sys.argv[1], sys.argv[2:]
    c = connect()
    if step == "setup":
        net, group = args
        out = {
            "add": wait(c, c.CreateNetwork(net, "10.77.0.0/28", gateway="10.77.0.1",
                                           add_reserved_ips="10.77.0.2", tags="zone:a")),
            "add_again": wait(c, c.CreateNetwork(net, "10.78.0.0/28")),
            "connect": wait(c, c.ConnectNetwork(net, group, "bridged", "br-corral77", "")),
            "inst1": create_instance(c, "netvm1", net, "pool"),
            "inst2": create_instance(c, "netvm2", net, "pool"),
            "clash": create_instance(c, "netvm3", net, "10.77.0.2"),
            "names": c.GetNetworks(),
            "bulk": c.GetNetworks(bulk=True),
            "one": c.GetNetwork(net),
            "tag": wait(c, c.AddNetworkTags(net, ["role:lan"])),
            "tags": sorted(c.GetNetworkTags(net)),
            "modify": wait(c, c.ModifyNetwork(net, add_reserved_ips=["10.77.0.9"])),
            "disconnect_in_use": wait(c, c.DisconnectNetwork(net, group)),
        }
    elif step == "teardown":
        net, group = args
        out = {
            "remove_connected": wait(c, c.DeleteNetwork(net)),
            "remove_inst": wait(c, c.DeleteInstance("netvm2")),
            "after_remove": c.GetNetwork(net),
            "disconnect": wait(c, c.DisconnectNetwork(net, group)),
            "remove": wait(c, c.DeleteNetwork(net)),
            "names": c.GetNetworks(),
        }
    else:
        raise SystemExit("unknown step %s" % step)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
