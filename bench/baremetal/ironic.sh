#!/bin/bash
# ironic.sh start|stop DIR [PORT]
#
# Runs Debian's OpenStack Ironic (python3-ironic, 21.4 on bookworm) on
# 127.0.0.1:PORT (default 6385) with the fake-hardware type, no
# authentication and sqlite, as the baseline bench/baremetal measures
# Corral against: ironic-api and ironic-conductor as two processes talking
# json-rpc, the way Ironic is deployed. Everything lives in DIR; stop kills
# only the process groups start recorded there.
#
# The ironic-common package's maintainer scripts need services these
# machines lack, so start unpacks its console scripts into DIR/bin instead
# of installing it (apt-get download; needs the Debian mirror once).
set -euo pipefail
die() { echo "ironic.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: $0 start|stop DIR [PORT]"
cmd=$1 dir=$2 port=${3:-6385} rpc=$(( ${3:-6385} + 1700 ))
py=/usr/bin/python3

stop() {
  [ -s "$dir/pids" ] || return 0
  for p in $(cat "$dir/pids"); do kill -TERM -- "-$p" 2>/dev/null || true; done
  sleep 1
  for p in $(cat "$dir/pids"); do kill -KILL -- "-$p" 2>/dev/null || true; done
  rm -f "$dir/pids"
}

scripts() {
  [ -x "$dir/bin/ironic-api" ] && return 0
  $py -c 'import ironic' 2>/dev/null || die "python3-ironic is not installed (apt-get install python3-ironic)"
  mkdir -p "$dir/debs" "$dir/unpacked" "$dir/bin"
  (cd "$dir/debs" && apt-get -o APT::Sandbox::User=root -q download ironic-common >/dev/null) || die "cannot download ironic-common"
  dpkg-deb -x "$dir"/debs/ironic-common_*.deb "$dir/unpacked"
  cp "$dir"/unpacked/usr/bin/ironic-* "$dir/bin/"
}

config() {
  mkdir -p "$dir/state" "$dir/log" "$dir/locks"
  cat >"$dir/ironic.conf" <<CONF
[DEFAULT]
auth_strategy = noauth
host = 127.0.0.1
rpc_transport = json-rpc
state_path = $dir/state
log_dir = $dir/log
use_stderr = false
minimum_memory_warning_only = true
enabled_hardware_types = fake-hardware
enabled_boot_interfaces = fake
enabled_deploy_interfaces = fake
enabled_management_interfaces = fake
enabled_power_interfaces = fake
enabled_rescue_interfaces = fake,no-rescue
default_rescue_interface = fake
enabled_inspect_interfaces = fake,no-inspect
enabled_console_interfaces = no-console
enabled_network_interfaces = noop
enabled_raid_interfaces = no-raid
enabled_bios_interfaces = no-bios
enabled_storage_interfaces = noop
enabled_vendor_interfaces = no-vendor
[api]
host_ip = 127.0.0.1
port = $port
[json_rpc]
auth_strategy = noauth
host_ip = 127.0.0.1
port = $rpc
[database]
connection = sqlite:///$dir/ironic.sqlite
[conductor]
automated_clean = true
sync_power_state_interval = -1
[dhcp]
dhcp_provider = none
[oslo_concurrency]
lock_path = $dir/locks
CONF
}

start() {
  stop
  scripts
  config
  rm -f "$dir/ironic.sqlite"
  $py "$dir/bin/ironic-dbsync" --config-file "$dir/ironic.conf" create_schema >"$dir/log/dbsync.out" 2>&1
  setsid $py "$dir/bin/ironic-conductor" --config-file "$dir/ironic.conf" >"$dir/log/conductor.out" 2>&1 &
  echo $! >>"$dir/pids"
  setsid $py "$dir/bin/ironic-api" --config-file "$dir/ironic.conf" >"$dir/log/api.out" 2>&1 &
  echo $! >>"$dir/pids"
  for _ in $(seq 60); do
    if curl -fsS -H 'X-OpenStack-Ironic-API-Version: 1.78' "http://127.0.0.1:$port/v1/drivers" 2>/dev/null | grep -q fake-hardware; then
      echo "ironic on http://127.0.0.1:$port"
      return 0
    fi
    sleep 1
  done
  die "ironic did not start; logs in $dir/log"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) die "unknown command $cmd" ;;
esac
