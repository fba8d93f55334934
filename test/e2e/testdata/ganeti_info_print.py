#!/usr/bin/python3
"""Prints Corral's answers the way Ganeti 3.0's gnt-cluster info and
gnt-instance info do, with Ganeti's own formatting code.

stdin: {"cluster_info": QueryClusterInfo's answer,
        "instance": one entry of OP_INSTANCE_QUERY_DATA's answer}
The answers come from a running Corral cluster; only the transport is
replaced, so a missing key or a wrong shape fails as it would for an
operator.
"""
import json
import sys

sys.path.insert(0, "/usr/share/ganeti/3.0")
from ganeti import cli  # noqa: E402
from ganeti.client import gnt_cluster, gnt_instance  # noqa: E402

data = json.load(sys.stdin)


class _Client(object):
    def QueryClusterInfo(self):
        return data["cluster_info"]


class _Opts(object):
    roman_integers = False


gnt_cluster.GetClient = _Client
gnt_cluster.ShowClusterConfig(_Opts(), [])
cli.PrintGenericInfo([gnt_instance._FormatInstanceInfo(data["instance"], False)])
