#!/usr/bin/python3
"""Submit N OP_TEST_DELAY(duration=D) jobs through Ganeti 3.0's own Python
LUXI client (luxi.Client, as Ganeti's tools use it), one SubmitJob call per
job, then wait until all are finalized; print one JSON line with jobs/s.

Usage: luxi_jobs.py SOCKET [N [D]]   (Debian's ganeti package provides the
client; D defaults to 0, which Corral runs as an empty job and Ganeti refuses:
give a positive D, e.g. 0.001, to compare the two)
"""
import json
import sys
import time

sys.path.insert(0, "/usr/share/ganeti/3.0")
from ganeti import luxi, opcodes  # noqa: E402

FINAL = ("success", "error", "canceled")


def main():
    sock = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    duration = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    cl = luxi.Client(address=sock)
    start = time.time()
    ids = [cl.SubmitJob([opcodes.OpTestDelay(duration=duration)]) for _ in range(n)]
    submitted = time.time()
    pending = set(int(i) for i in ids)
    statuses = {}
    while pending:
        chunk = sorted(pending)[:500]
        for (jid, status) in cl.QueryJobs(chunk, ["id", "status"]):
            if status in FINAL:
                pending.discard(int(jid))
                statuses[status] = statuses.get(status, 0) + 1
        if pending:
            time.sleep(0.02)
    done = time.time()
    print(json.dumps({
        "jobs": n, "duration": duration, "submit_s": round(submitted - start, 3), "total_s": round(done - start, 3),
        "submit_jobs_per_s": round(n / (submitted - start), 1),
        "jobs_per_s": round(n / (done - start), 1), "statuses": statuses,
    }))


if __name__ == "__main__":
    main()
