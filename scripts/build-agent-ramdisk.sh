#!/bin/bash
# build-agent-ramdisk.sh OUTDIR
#
# Builds the ramdisk bare-metal machines boot to run corral-agent:
# OUTDIR/vmlinuz and OUTDIR/initrd.img, the directory corral-node's
# --agent-ramdisk names.
# The initramfs is the tiny guest of build-guest-image.sh (its kernel,
# busybox and modules; built or reused in ${CORRAL_GUEST_DIR:-OUTDIR/guest},
# so no network is needed once its packages are cached) plus:
#   - /bin/corral-agent, static (CGO_ENABLED=0), built from this repository
#     with go, or taken from $AGENT_BIN when set;
#   - an /init that, when ipa-api-url=URL or corral.rescue=offline (the
#     rescue of a VM instance: corral-node appends an archive holding
#     /etc/corral-rescue.json to the initrd) is on the kernel command line,
#     loads the modules, starts corral-agent with its log on the console,
#     and runs a login prompt (busybox getty) on the console's serial port
#     (the last console=ttyS* argument, else ttyS0). Without ipa-api-url it
#     starts the tiny guest's own /init (kept as /init.guest).
#   - the udhcpc script the agent's DHCP uses, and /etc/shadow with root
#     locked: only the rescue user the agent's finalize_rescue writes can
#     log in (on the console, or with SSH through the agent's server).
# corral-node makes the per-machine boot ISO of these two files
# (internal/baremetal/bootiso) with the machine's own command line.
#
# Agent settings on the kernel command line: ipa-api-url=URL (the Bare
# Metal API), corral.api-ca-sha256=HEX (pin of the API's certificate when
# the URL is https), ipa-advertise-host=, ipa-advertise-port= (the callback
# address the conductor uses, when not the machine's DHCP address),
# ipa-listen-port= (default 9999), corral.rescue-ssh-port= (the rescue
# SSH server the agent starts after finalize_rescue; default 22, 0: none),
# corral.rescue=offline (no API: the rescue user from /etc/corral-rescue.json).
#
# Needs: the tools of build-guest-image.sh, and go (unless AGENT_BIN).
set -euo pipefail

die() { echo "build-agent-ramdisk: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 OUTDIR"
OUT=$1
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
GUEST=${CORRAL_GUEST_DIR:-$OUT/guest}
for tool in cpio gzip; do
  command -v "$tool" >/dev/null || die "missing tool: $tool"
done

"$REPO/scripts/build-guest-image.sh" "$GUEST" >/dev/null

WORK=$(mktemp -d "${TMPDIR:-/tmp}/corral-agent-ramdisk.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

if [ -n "${AGENT_BIN:-}" ]; then
  [ -x "$AGENT_BIN" ] || die "AGENT_BIN=$AGENT_BIN is not an executable"
  cp "$AGENT_BIN" "$WORK/corral-agent"
else
  command -v go >/dev/null || die "missing tool: go (or set AGENT_BIN)"
  (cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$WORK/corral-agent" ./cmd/corral-agent) ||
    die "go build of cmd/corral-agent failed"
fi

R=$WORK/root
mkdir -p "$R"
(cd "$R" && gzip -dc "$GUEST/initrd.img" | cpio -id --quiet --no-absolute-filenames) || die "cannot unpack $GUEST/initrd.img"
[ -x "$R/init" ] && [ -x "$R/bin/busybox" ] || die "$GUEST/initrd.img is not the tiny guest's initramfs"
mv "$R/init" "$R/init.guest"
install -m 0755 "$WORK/corral-agent" "$R/bin/corral-agent"
mkdir -p "$R/etc/udhcpc" "$R/root" "$R/var/log"
chmod 0700 "$R/root"
echo "root:*:1:0:99999:7:::" > "$R/etc/shadow"
chmod 0600 "$R/etc/shadow"
printf 'Corral bare-metal agent ramdisk\n\n' > "$R/etc/issue"

cat > "$R/etc/udhcpc/default.script" <<'EOS'
#!/bin/sh
# udhcpc's hook: configure the lease on $interface.
case "$1" in
  deconfig)
    ip addr flush dev "$interface"
    ip link set "$interface" up
    ;;
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/${mask:-24}" dev "$interface"
    if [ -n "$router" ]; then
      ip route del default dev "$interface" 2>/dev/null
      for r in $router; do ip route add default via "$r" dev "$interface" && break; done
    fi
    if [ -n "$dns" ]; then
      : > /etc/resolv.conf
      for d in $dns; do echo "nameserver $d" >> /etc/resolv.conf; done
    fi
    echo "corral-agent: DHCP $interface $ip/${mask:-24}" > /dev/console
    ;;
esac
exit 0
EOS
chmod 0755 "$R/etc/udhcpc/default.script"

cat > "$R/init" <<'EOS'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
if ! /bin/busybox grep -qE 'ipa-api-url=|corral\.rescue=offline' /proc/cmdline; then
  /bin/busybox umount /proc
  exec /init.guest
fi
/bin/busybox --install -s
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /tmp
for m in $(cat /etc/modules); do
  insmod "$m" 2>/dev/null || echo "corral-init: cannot load $m"
done
hostname corral-agent
acpid -c /etc/acpi -l /run/acpid.log 2>/dev/null
tty=ttyS0
for w in $(cat /proc/cmdline); do
  case "$w" in console=ttyS*) tty=${w#console=}; tty=${tty%%,*} ;; esac
done
echo "CORRAL-AGENT-RAMDISK booted; agent starting, login on $tty"
(
  while true; do
    /bin/corral-agent </dev/null >/dev/console 2>&1
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 2 ] && break
    echo "corral-agent: exited with $rc; restarting in 5 s" > /dev/console
    sleep 5
  done
) &
while true; do
  getty -L 115200 "$tty" vt100
  sleep 1
done
EOS
chmod 0755 "$R/init"

(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet | gzip -6) > "$WORK/initrd.img"
cp "$GUEST/vmlinuz" "$WORK/vmlinuz"
mv "$WORK/vmlinuz" "$OUT/vmlinuz"
mv "$WORK/initrd.img" "$OUT/initrd.img"
chmod 0644 "$OUT/vmlinuz" "$OUT/initrd.img"
echo "built $OUT/vmlinuz and $OUT/initrd.img ($(du -k "$OUT/initrd.img" | cut -f1) KiB)"
