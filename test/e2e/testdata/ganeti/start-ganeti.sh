#!/bin/bash
# Starts a one-node Ganeti 3.0 cluster from the distribution's packages, for
# the tests that move instances between Ganeti and Corral. It installs
# nothing (scripts/install-deps.sh does) and refuses to run when a package
# is missing. Safe to run again: a cluster that exists is only started.
#
# What it sets up, all on this machine:
#   - an empty bridge (no ports) carrying the node address and the cluster's
#     master address, with an "unreachable" route for the rest of its /24 so
#     nothing leaves the host;
#   - a marked block in /etc/hosts: Ganeti wants its host name on an address
#     the host owns, not on 127.0.0.1, and the cluster name and instance
#     names (inst1..inst4.<domain>) resolvable;
#   - sshd, when nothing listens on port 22 yet (its pid file is ours);
#   - the "rawcopy" OS definition: dd of the disk in export, dd into it in
#     import, as the tests need the bytes themselves to move;
#   - gnt-cluster init with the fake hypervisor and file disks;
#   - a RAPI user with write access.
# Ganeti's daemons use their fixed ports while they run: noded 1811/tcp,
# confd 1814/udp, RAPI 5080/tcp, metad 80/tcp on the master address.
#
# Environment: GANETI_NODE_IP, GANETI_CLUSTER_IP, GANETI_BRIDGE,
# GANETI_DOMAIN, GANETI_RAPI_USER, GANETI_RAPI_PASSWORD.
set -euo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

node_ip=${GANETI_NODE_IP:-198.18.77.1}
cluster_ip=${GANETI_CLUSTER_IP:-198.18.77.10}
bridge=${GANETI_BRIDGE:-gntbr0}
domain=${GANETI_DOMAIN:-ganeti.test}
rapi_user=${GANETI_RAPI_USER:-mover}
rapi_password=${GANETI_RAPI_PASSWORD:-mover-secret}
short=$(hostname -s)
node_name=$short.$domain
cluster_name=gnt.$domain
file_dir=/srv/ganeti/file-storage
os_dir=/srv/ganeti/os/rawcopy
sshd_pid=/run/corral-ganeti-sshd.pid

say() { echo "start-ganeti: $*"; }

missing=()
for p in ganeti socat openssh-server fping iproute2 curl; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == *"ok installed"* ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "start-ganeti: missing packages: ${missing[*]} (scripts/install-deps.sh installs them)" >&2
  exit 3
fi

# The network: a bridge without ports holds the addresses.
ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
ip link set "$bridge" up
# (No "| grep -q" with pipefail: grep's early exit would fail the pipe.)
addrs=$(ip -4 addr show dev "$bridge")
[[ $addrs == *" $node_ip/24 "* ]] || ip addr add "$node_ip/24" dev "$bridge"
net=${node_ip%.*}.0/24
routes=$(ip route show table main)
[[ $routes == *"unreachable $net"* ]] || ip route add unreachable "$net" metric 4000

# /etc/hosts: take the host name off loopback lines, then write our block.
# The file is rewritten in place (it may be a bind mount).
hosts_new=$(mktemp)
awk -v h="$short" '
  /^# BEGIN corral-ganeti/ {skip=1; next}
  /^# END corral-ganeti/   {skip=0; next}
  skip {next}
  $1 ~ /^127\./ {
    line=$1; kept=0
    for (i=2; i<=NF; i++) if ($i != h) { line=line " " $i; kept++ }
    if (kept) print line
    next
  }
  {print}' /etc/hosts > "$hosts_new"
{
  echo "# BEGIN corral-ganeti"
  echo "$node_ip $node_name $short"
  echo "$cluster_ip $cluster_name ${cluster_name%%.*}"
  # Instance names: Ganeti creates an instance (move-instance's too) only
  # when its name resolves.
  for i in 1 2 3 4; do echo "${node_ip%.*}.$((20 + i)) inst$i.$domain"; done
  echo "# END corral-ganeti"
} >> "$hosts_new"
cmp -s "$hosts_new" /etc/hosts || cat "$hosts_new" > /etc/hosts
rm -f "$hosts_new"

# Ganeti's node setup talks to sshd; start one only if none runs.
if [[ -z "$(ss -ltnH 'sport = :22')" ]]; then
  ssh-keygen -A >/dev/null
  mkdir -p /run/sshd
  /usr/sbin/sshd -o PidFile="$sshd_pid"
fi

mkdir -p "$file_dir"
touch /etc/ganeti/file-storage-paths
grep -qxF "$file_dir" /etc/ganeti/file-storage-paths || echo "$file_dir" >> /etc/ganeti/file-storage-paths

mkdir -p "$os_dir"
echo 20 > "$os_dir/ganeti_api_version"
: > "$os_dir/parameters.list"
printf '#!/bin/sh\nexit 0\n' > "$os_dir/create"
printf '#!/bin/sh\nexit 0\n' > "$os_dir/rename"
printf '#!/bin/sh\nexit 0\n' > "$os_dir/verify"
printf '#!/bin/sh\nset -e\nexec dd if="$EXPORT_DEVICE" bs=1M status=none\n' > "$os_dir/export"
printf '#!/bin/sh\nset -e\nexec dd of="$IMPORT_DEVICE" bs=1M conv=notrunc status=none\n' > "$os_dir/import"
chmod 755 "$os_dir"/create "$os_dir"/rename "$os_dir"/verify "$os_dir"/export "$os_dir"/import

# luxid answers queries: gnt-cluster getmaster reads ssconf and proves
# nothing about the master daemon, gnt-cluster info asks it.
luxid_answers() { timeout 20 gnt-cluster info >/dev/null 2>&1; }
wait_luxid() {
  local deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do luxid_answers && return 0; sleep 1; done
  return 1
}
daemon_logs() {
  local f
  for f in /var/log/ganeti/luxi-daemon.log /var/log/ganeti/wconf-daemon.log /var/log/ganeti/node-daemon.log; do
    [[ -f $f ]] && { echo "--- last lines of $f"; tail -n 15 "$f"; }
  done
}

# A cluster left by an earlier run that cannot come back (made on a host
# of another name, or whose master daemon does not answer) is set aside,
# not destroyed: its state moves to a dated directory and a new cluster
# is initialised.
# A daemon killed without its shutdown leaves its pid file; start-stop-daemon
# then refuses to start it again ("matching only on non-root pidfile ... is
# insecure"), as Ganeti's daemons run under their own users. A pid file
# whose process is gone, or is no Ganeti daemon, is removed.
clear_stale_pidfiles() {
  local f pid
  for f in /var/run/ganeti/*.pid; do
    [[ -f $f ]] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    if [[ ! $pid =~ ^[0-9]+$ ]] || ! tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -q ganeti; then
      say "removing the stale pid file $f"
      rm -f "$f"
    fi
  done
}

set_aside() {
  local dir=/var/lib/ganeti-set-aside.$(date +%Y%m%d%H%M%S)
  say "setting the existing cluster aside ($1); its state moves to $dir"
  /usr/lib/ganeti/daemon-util stop-all >/dev/null 2>&1 || true
  clear_stale_pidfiles
  ip addr del "$cluster_ip/32" dev "$bridge" 2>/dev/null || true
  # gnt-cluster init wants a data directory without files.
  mv /var/lib/ganeti "$dir"
  install -d -m 0755 /var/lib/ganeti
}

if [[ -f /var/lib/ganeti/config.data ]]; then
  master=$(cat /var/lib/ganeti/ssconf_master_node 2>/dev/null || true)
  if [[ $master != "$node_name" ]]; then
    set_aside "its master is '$master', this host is $node_name"
  else
    say "cluster exists; starting its daemons"
    # check-and-start starts only what is not running (start-all refuses
    # daemons that run already). kvmd exits at once without KVM: expected.
    clear_stale_pidfiles
    for d in $(/usr/lib/ganeti/daemon-util list-start-daemons); do
      /usr/lib/ganeti/daemon-util check-and-start "$d" || true
    done
    if wait_luxid 90; then
      addrs=$(ip -4 addr show dev "$bridge")
      [[ $addrs == *" $cluster_ip/"* ]] || gnt-cluster activate-master-ip || true
    else
      daemon_logs
      set_aside "its master daemon did not answer within 90 s"
    fi
  fi
fi
if [[ ! -f /var/lib/ganeti/config.data ]]; then
  say "initialising $cluster_name on $node_name"
  gnt-cluster init --enabled-hypervisors=fake --enabled-disk-templates=file,diskless \
    --file-storage-dir="$file_dir" --master-netdev="$bridge" --master-netmask=32 \
    --no-etc-hosts -N mode=bridged,link="$bridge" "$cluster_name"
fi

# The default instance policy wants disks of 1 GiB and more and a NIC;
# the tests move small disks without NICs.
if ! wait_luxid 90; then
  daemon_logs
  echo "start-ganeti: Ganeti's master daemon did not answer within 90 s" >&2
  exit 1
fi
gnt-cluster modify --ipolicy-bounds-specs \
  min:cpu-count=1,disk-count=1,disk-size=1,memory-size=32,nic-count=0,spindle-use=1/max:cpu-count=8,disk-count=16,disk-size=1048576,memory-size=32768,nic-count=8,spindle-use=12 \
  >/dev/null

users=/var/lib/ganeti/rapi/users
install -d -m 0750 /var/lib/ganeti/rapi
touch "$users"
if ! grep -qxF "$rapi_user $rapi_password write" "$users"; then
  { grep -v "^$rapi_user " "$users" || true; echo "$rapi_user $rapi_password write"; } > "$users.new"
  mv "$users.new" "$users"
fi
chown gnt-rapi:gnt-masterd "$users" /var/lib/ganeti/rapi 2>/dev/null || true
chmod 0640 "$users"

for _ in $(seq 90); do
  code=$(curl -sk -u "$rapi_user:$rapi_password" -o /dev/null -w '%{http_code}' https://127.0.0.1:5080/2/info || true)
  [[ $code == 200 ]] && { say "ready: master $(gnt-cluster getmaster), RAPI https://127.0.0.1:5080"; exit 0; }
  sleep 1
done
echo "start-ganeti: RAPI did not answer within 90 s" >&2
exit 1
