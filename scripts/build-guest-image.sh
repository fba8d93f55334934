#!/bin/bash
# build-guest-image.sh OUTDIR
#
# Builds the small guest Corral's tests boot: a Debian cloud kernel
# (OUTDIR/vmlinuz) and a busybox initramfs (OUTDIR/initrd.img), from Debian
# packages only. The packages are cached in OUTDIR/debs; once they are there
# the build needs no network. Re-running is cheap: nothing is rebuilt while the
# outputs are newer than the packages and this script.
#
# The initramfs /init loads the virtio (pci, blk, net, console, scsi), IDE/SCSI
# disk, ACPI power button and evdev modules, then:
#   - with root=/dev/... on the kernel command line: mounts it (ext4 driver,
#     which also reads ext2) on /newroot and switches to its /sbin/init; if that
#     fails it prints CORRAL-GUEST-NOROOT and runs a shell;
#   - otherwise prints "CORRAL-GUEST-BOOTED initramfs" and runs a shell on the
#     console; the ACPI power button powers the guest off.
#
# Needs: apt-get/apt-cache (only to fetch missing packages), dpkg-deb, cpio,
# gzip, awk.
set -euo pipefail

die() { echo "build-guest-image: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 OUTDIR"
OUT=$1
mkdir -p "$OUT/debs"
OUT=$(cd "$OUT" && pwd)
DEBS=$OUT/debs
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

for tool in dpkg-deb cpio gzip awk; do
  command -v "$tool" >/dev/null || die "missing tool: $tool"
done

# apt-get download as root warns that the _apt sandbox user cannot write here.
APT_OPTS=()
[ "$(id -u)" = 0 ] && APT_OPTS=(-o APT::Sandbox::User=root)

fetch() { # fetch PACKAGE: download PACKAGE's .deb into $DEBS
  (cd "$DEBS" && apt-get "${APT_OPTS[@]}" -q download "$1" >/dev/null 2>"$DEBS/.apt-error") ||
    die "cannot download package $1 ($(tail -n1 "$DEBS/.apt-error")); check the Debian mirror or run apt-get update"
  rm -f "$DEBS/.apt-error"
}

newest() { ls "$@" 2>/dev/null | sort -V | tail -n1 || true; }

kdeb=$(newest "$DEBS"/linux-image-[0-9]*-cloud-amd64_*.deb)
if [ -z "$kdeb" ]; then
  command -v apt-cache >/dev/null || die "no kernel package in $DEBS and no apt-cache to find one"
  kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -n "$kpkg" ] || die "cannot resolve linux-image-cloud-amd64 to a kernel package; run apt-get update"
  echo "downloading $kpkg"
  fetch "$kpkg"
  kdeb=$(newest "$DEBS"/"$kpkg"_*.deb)
  [ -n "$kdeb" ] || die "download of $kpkg produced no .deb in $DEBS"
fi
bdeb=$(newest "$DEBS"/busybox-static_*.deb)
if [ -z "$bdeb" ]; then
  echo "downloading busybox-static"
  fetch busybox-static
  bdeb=$(newest "$DEBS"/busybox-static_*.deb)
  [ -n "$bdeb" ] || die "download of busybox-static produced no .deb in $DEBS"
fi

uptodate() {
  local out
  for out in "$OUT/vmlinuz" "$OUT/initrd.img"; do
    [ -s "$out" ] || return 1
    [ "$out" -nt "$kdeb" ] && [ "$out" -nt "$bdeb" ] && [ "$out" -nt "$SELF" ] || return 1
  done
}
if uptodate; then
  echo "guest image in $OUT is up to date ($(cat "$OUT/kernel-version" 2>/dev/null || echo unknown kernel))"
  exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/corral-guest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

dpkg-deb -x "$kdeb" "$WORK/kernel"
dpkg-deb -x "$bdeb" "$WORK/busybox"
BB=$WORK/busybox/bin/busybox
[ -x "$BB" ] || die "$bdeb has no bin/busybox"
KVER=$(ls "$WORK/kernel/lib/modules" | head -n1)
[ -n "$KVER" ] && [ -f "$WORK/kernel/boot/vmlinuz-$KVER" ] || die "$kdeb has no kernel image"
MODS=$WORK/kernel/lib/modules/$KVER

# Debian's package ships no modules.dep (depmod runs at install time), and the
# host need not have kmod: busybox's depmod writes it.
"$BB" depmod -b "$WORK/kernel" "$KVER"

ROOT=$WORK/root
mkdir -p "$ROOT"/{bin,sbin,usr/bin,usr/sbin,etc/acpi/PWRF,proc,sys,dev,run,tmp,newroot,root}
cp "$BB" "$ROOT/bin/busybox"

# Modules to load, with their dependencies first (depth-first over
# modules.dep). Missing ones are reported and skipped.
WANT="virtio_pci virtio_blk virtio_net virtio_console virtio_scsi virtio_rng virtio_balloon ata_piix sd_mod button evdev"
awk -v want="$WANT" '
  function visit(p,    n, i, d) {
    if (p == "" || seen[p]++) return
    n = split(deps[p], d, " ")
    for (i = 1; i <= n; i++) visit(d[i])
    print p
  }
  {
    path = $1; sub(/:$/, "", path)
    rest = $0; sub(/^[^:]*:[ \t]*/, "", rest)
    deps[path] = rest
    name = path; sub(/.*\//, "", name); sub(/\.ko.*$/, "", name); gsub(/-/, "_", name)
    byname[name] = path
  }
  END {
    n = split(want, w, " ")
    for (i = 1; i <= n; i++) {
      if (!(w[i] in byname)) { print "module " w[i] " not in this kernel, skipped" > "/dev/stderr"; continue }
      visit(byname[w[i]])
    }
  }' "$MODS/modules.dep" > "$WORK/modules.order"
: > "$ROOT/etc/modules"
while read -r m; do
  mkdir -p "$ROOT/lib/modules/$KVER/$(dirname "$m")"
  cp "$MODS/$m" "$ROOT/lib/modules/$KVER/$m"
  echo "/lib/modules/$KVER/$m" >> "$ROOT/etc/modules"
done < "$WORK/modules.order"

echo "root:x:0:0:root:/root:/bin/sh" > "$ROOT/etc/passwd"
echo "root:x:0:" > "$ROOT/etc/group"
cat > "$ROOT/etc/acpi/PWRF/00000080" <<'EOF'
#!/bin/sh
echo "CORRAL-GUEST-POWERDOWN" > /dev/console
sync
poweroff -f
EOF
chmod 755 "$ROOT/etc/acpi/PWRF/00000080"

cat > "$ROOT/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# Probing happens inside insmod, so the devices exist when it returns.
for m in $(cat /etc/modules); do
  insmod "$m" 2>/dev/null || echo "corral-init: cannot load $m"
done

shell() {
  while true; do setsid cttyhack sh -l; done
}

root=""
mode=ro
for w in $(cat /proc/cmdline); do
  case "$w" in
    root=*) root=${w#root=} ;;
    rw) mode=rw ;;
    ro) mode=ro ;;
  esac
done

case "$root" in
  /dev/*)
    if mount -t ext4 -o "$mode" "$root" /newroot 2>/dev/null; then
      if [ -x /newroot/sbin/init ] || [ -L /newroot/sbin/init ]; then
        umount /proc /sys
        mount --move /dev /newroot/dev 2>/dev/null || umount /dev
        exec switch_root /newroot /sbin/init
      fi
      echo "corral-init: $root has no /sbin/init"
      umount /newroot
    else
      echo "corral-init: cannot mount $root"
    fi
    echo "CORRAL-GUEST-NOROOT"
    shell
    ;;
esac

hostname corral-guest
acpid -c /etc/acpi -l /run/acpid.log 2>/dev/null
echo "CORRAL-GUEST-BOOTED initramfs"
shell
EOF
chmod 755 "$ROOT/init"

cp "$WORK/kernel/boot/vmlinuz-$KVER" "$WORK/vmlinuz"
(cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet | gzip -6) > "$WORK/initrd.img"
# Replace the outputs only when both are complete.
mv "$WORK/vmlinuz" "$OUT/vmlinuz"
mv "$WORK/initrd.img" "$OUT/initrd.img"
echo "$KVER" > "$OUT/kernel-version"
chmod 644 "$OUT/vmlinuz" "$OUT/initrd.img" "$OUT/kernel-version"
echo "built $OUT/vmlinuz and $OUT/initrd.img (kernel $KVER; modules: $(sed 's#.*/##; s#\.ko.*##' "$WORK/modules.order" | tr '\n' ' '))"
