#!/usr/bin/env bash
# Measures Corral in Ganeti drop-in mode with Ganeti's own client tools
# (outside CI; needs root, 'make build' and Debian's ganeti and
# ganeti-os-noop): brings up a two-node drop-in dev cluster with the fake
# hypervisor, submits N OP_TEST_DELAY(duration=0) jobs through Ganeti's
# Python LUXI client and waits for them (jobs/s), then times Ganeti's burnin
# (the scenario of test/e2e/ganeti_burnin_test.go), and tears the cluster
# down. Usage: bench/ganeti/run.sh [N]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-1000}
dir=$(mktemp -d /tmp/corral-bench-ganeti-XXXXXX)
chmod 755 "$dir"
trap 'bin/corral dev down --state-dir "$dir" --purge >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bin/corral dev up --nodes 1 --state-dir "$dir" --hypervisors fake \
  --os-dir "$PWD/os:/usr/share/ganeti/os" --ganeti-dropin >/dev/null
. "$dir/env"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
/usr/bin/python3 bench/ganeti/luxi_jobs.py "$GANETI_ROOTDIR/var/run/ganeti/socket/ganeti-query" "$n"
start=$(date +%s.%N)
/usr/lib/ganeti/tools/burnin -o noop -t file --disk-size 16m --disk-growth 8m -H fake -n node1,node2 \
  --rename burnin3.example.com --mem-size 128m --no-move --no-confd --no-add-nics --no-add-disks \
  --no-name-check --no-ip-check burnin1.example.com burnin2.example.com >"$dir/burnin.log" 2>&1 \
  || { cat "$dir/burnin.log" >&2; exit 1; }
end=$(date +%s.%N)
printf '{"burnin_s": %.2f, "instances": 2}\n' "$(echo "$end - $start" | bc)"
