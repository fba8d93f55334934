#!/bin/bash
# Stops what start-ganeti.sh started: Ganeti's daemons (through daemon-util,
# which goes by their pid files), the master address and the sshd whose pid
# file start-ganeti.sh wrote. Nothing is killed by name. The cluster's
# configuration stays, so start-ganeti.sh brings the same cluster back;
# --purge also removes its instances, destroys it and takes the /etc/hosts
# block and the bridge away.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
bridge=${GANETI_BRIDGE:-gntbr0}
node_ip=${GANETI_NODE_IP:-198.18.77.1}
sshd_pid=/run/corral-ganeti-sshd.pid
purge=0
[[ ${1:-} == --purge ]] && purge=1

if [[ -f /var/lib/ganeti/config.data ]] && gnt-cluster getmaster >/dev/null 2>&1; then
  if ((purge)); then
    for i in $(gnt-instance list --no-headers -o name 2>/dev/null); do
      gnt-instance remove --force --ignore-failures "$i" || true
    done
    gnt-cluster destroy --yes-do-it || echo "stop-ganeti: gnt-cluster destroy failed" >&2
  else
    gnt-cluster deactivate-master-ip --yes || true
  fi
fi
/usr/lib/ganeti/daemon-util stop-all || true

if [[ -f $sshd_pid ]]; then
  pid=$(cat "$sshd_pid")
  [[ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" == /usr/sbin/sshd ]] && kill "$pid"
  rm -f "$sshd_pid"
fi

if ((purge)); then
  ip link show "$bridge" >/dev/null 2>&1 && ip link del "$bridge"
  ip route del unreachable "${node_ip%.*}.0/24" metric 4000 2>/dev/null || true
  if grep -q '^# BEGIN corral-ganeti' /etc/hosts; then
    hosts_new=$(mktemp)
    awk '/^# BEGIN corral-ganeti/{s=1;next} /^# END corral-ganeti/{s=0;next} !s' /etc/hosts > "$hosts_new"
    grep -qw "$(hostname -s)" "$hosts_new" || echo "127.0.0.1 $(hostname -s)" >> "$hosts_new"
    cat "$hosts_new" > /etc/hosts
    rm -f "$hosts_new"
  fi
  rm -rf /var/lib/ganeti/queue/archive/* /srv/ganeti/os/rawcopy /var/lib/ganeti/rapi/users
fi

left=0
for d in $(/usr/lib/ganeti/daemon-util list-stop-daemons); do
  if /usr/lib/ganeti/daemon-util check "$d" 2>/dev/null; then
    echo "stop-ganeti: $d still runs" >&2
    left=1
  fi
done
exit $left
