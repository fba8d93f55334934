#!/usr/bin/python3
"""Writes ganeti-3.0-fields.json: the query fields Ganeti 3.0.2 declares.

Run with Debian's ganeti 3.0.2 installed:
    /usr/bin/python3 internal/query/testdata/ganeti-fields.py > internal/query/testdata/ganeti-3.0-fields.json

It reads query.ALL_FIELDS of Ganeti's installed Python library (lib/query.py),
which mirrors luxid's src/Ganeti/Query/*.hs lists, and keeps each field's
name, title and kind. Field descriptions are left out: Corral words its own.

Where the two sides disagree, luxid's (Haskell) definition wins, since luxid
is what answers LUXI queries in Ganeti 3.0: see LUXID_DIFFERENCES.
"""
import json
import sys

sys.path.insert(0, "/usr/share/ganeti/3.0")
from ganeti import query  # noqa: E402

RESOURCES = ["instance", "node", "group", "job", "cluster", "os", "export",
             "lock", "network"]

# (resource, field) -> (title, kind) as src/Ganeti/Query/*.hs declares it.
LUXID_DIFFERENCES = {
    ("lock", "name"): ("Name", "other"),  # src/Ganeti/Query/Locks.hs
}

# Resources only luxid has (no Python field list): name, title and kind as
# src/Ganeti/Query/*.hs declares them.
LUXID_ONLY = {
    # src/Ganeti/Query/FilterRules.hs
    "filter": [["action", "Action", "other"], ["predicates", "Predicates", "other"],
               ["priority", "Priority", "other"], ["reason_trail", "ReasonTrail", "other"],
               ["uuid", "UUID", "other"], ["watermark", "Watermark", "other"]],
}

out = {"_source": "ganeti 3.0.2 lib/query.py ALL_FIELDS, see ganeti-fields.py"}
for res in RESOURCES:
    fields = query.ALL_FIELDS[res]
    rows = []
    for (fd, _, _, _) in fields.values():
        title, kind = LUXID_DIFFERENCES.get((res, fd.name), (fd.title, fd.kind))
        rows.append([fd.name, title, kind])
    out[res] = sorted(rows)
for res, rows in LUXID_ONLY.items():
    out[res] = sorted(rows)
# One field per line keeps diffs readable.
lines = ['{', ' "_source": %s,' % json.dumps(out.pop("_source"))]
for i, res in enumerate(sorted(out)):
    rows = ",\n".join("  " + json.dumps(f) for f in out[res])
    end = "," if i < len(out) - 1 else ""
    lines.append(' %s: [\n%s\n ]%s' % (json.dumps(res), rows, end))
lines.append("}")
sys.stdout.write("\n".join(lines) + "\n")
