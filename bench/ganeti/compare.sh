#!/usr/bin/env bash
# Ganeti 3.0 and Corral side by side, measured with Ganeti's own tools in one
# sitting (outside CI; needs root, 'make build' and the packages
# scripts/install-deps.sh installs): N OP_TEST_DELAY jobs of 1 ms (Ganeti
# refuses a zero delay) through Ganeti's Python LUXI client, each submitted
# alone and all waited for, then burnin's standard scenario (fake hypervisor, file disks, two
# instances on one node), first against a real one-node Ganeti 3.0 started
# with the e2e tests' script, then against a one-node Corral dev cluster in
# drop-in mode. The Ganeti cluster is destroyed at the end.
# Usage: bench/ganeti/compare.sh [N]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-1000}
gdir=test/e2e/testdata/ganeti
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
burnin_opts=(-o noop -t file --disk-size 16m --disk-growth 8m -H fake --mem-size 128m
  --no-move --no-confd --no-add-nics --no-add-disks --no-name-check --no-ip-check)
log=$(mktemp -d /tmp/corral-compare-XXXXXX)

timed_burnin() { # label node...
  local label=$1; shift
  local nodes; nodes=$(IFS=,; echo "$*")
  local start end
  start=$(date +%s.%N)
  /usr/lib/ganeti/tools/burnin "${burnin_opts[@]}" -n "$nodes" \
    burnin1.example.com burnin2.example.com >"$log/burnin-$label.log" 2>&1 \
    || { cat "$log/burnin-$label.log" >&2; return 1; }
  end=$(date +%s.%N)
  printf '{"system": "%s", "burnin_s": %.2f, "instances": 2}\n' "$label" "$(echo "$end - $start" | bc)"
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# Ganeti 3.0.2
trap '$gdir/stop-ganeti.sh --purge >/dev/null 2>&1 || true' EXIT
"$gdir/start-ganeti.sh" >"$log/start-ganeti.log" 2>&1 || { cat "$log/start-ganeti.log" >&2; exit 1; }
gnode=$(gnt-cluster getmaster)
printf '{"system": "ganeti", "luxi": %s}\n' \
  "$(/usr/bin/python3 bench/ganeti/luxi_jobs.py /var/run/ganeti/socket/ganeti-query "$n" 0.001)"
timed_burnin ganeti "$gnode"
"$gdir/stop-ganeti.sh" --purge >/dev/null 2>&1
trap - EXIT

# Corral, one node, drop-in mode
dir=$(mktemp -d /tmp/corral-compare-dev-XXXXXX)
chmod 755 "$dir"
trap 'bin/corral dev down --state-dir "$dir" --purge >/dev/null 2>&1 || true; rmdir "$dir" 2>/dev/null || true; echo "logs: $log" >&2' EXIT
bin/corral dev up --nodes 0 --state-dir "$dir" --hypervisors fake \
  --os-dir "$PWD/os:/usr/share/ganeti/os" --ganeti-dropin >/dev/null
# shellcheck disable=SC1091
. "$dir/env"
printf '{"system": "corral", "luxi": %s}\n' \
  "$(/usr/bin/python3 bench/ganeti/luxi_jobs.py "$GANETI_ROOTDIR/var/run/ganeti/socket/ganeti-query" "$n" 0.001)"
timed_burnin corral node1
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
