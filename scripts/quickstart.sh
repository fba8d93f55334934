#!/usr/bin/env bash
# One command from a fresh machine to a running cluster with a running kvm
# instance: installs the Debian packages, builds, builds the guest image,
# brings up a one-machine dev cluster on the embedded store and starts an
# instance of the tiny OS. Run as root from the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
STATE=${CORRAL_DEV_STATE:-/var/lib/corral-dev}
IMAGES=${CORRAL_IMAGE_DIR:-/var/lib/corral/images/tiny}

scripts/install-deps.sh
make build
scripts/build-guest-image.sh "$IMAGES"
chmod 755 "$IMAGES"; chmod 644 "$IMAGES"/vmlinuz "$IMAGES"/initrd.img

if [ -f "$STATE/dev.json" ]; then
  echo "A dev cluster already runs in $STATE; stopping it first."
  bin/corral dev down --state-dir "$STATE" --purge
fi
bin/corral dev up --state-dir "$STATE" --image-dir "$IMAGES"
# shellcheck disable=SC1091
. "$STATE/env"
bin/corral instance add -t file -o tiny+default --disk 0:size=64M --no-nics \
  -H kvm -B memory=256 demo1
bin/corral instance list -o name,hypervisor,os,pnode,status,oper_ram
serial=$(ls "$CORRAL_RUN_DIR"/node1/kvm/*/serial.log | head -1)
echo "Waiting for the guest to boot (serial log $serial)..."
for _ in $(seq 120); do
  grep -q CORRAL-GUEST-BOOTED "$serial" 2>/dev/null && break
  sleep 1
done
grep CORRAL-GUEST-BOOTED "$serial"

# A bare-metal machine too: fake-hardware walks enroll -> active in seconds.
bin/corral baremetal node create --driver fake-hardware --name bm-demo >/dev/null
for verb in manage provide deploy; do
  bin/corral baremetal node "$verb" bm-demo --wait=60
done
if command -v openstack >/dev/null; then
  # The unchanged openstack client, through the Bare Metal API of corral-rapi.
  (. "$STATE/baremetal.env"; XDG_CACHE_HOME=$(mktemp -d) openstack baremetal node list)
else
  bin/corral baremetal node list
fi
cat <<MSG

Cluster up, instance demo1 running under qemu (as user corral-qemu).
  . $STATE/env                       # point the CLI at this cluster
  bin/corral instance console demo1   # serial console (Ctrl-] leaves)
  bin/corral job list
  bin/corral baremetal node list      # bare-metal machines (bm-demo is active)
  . $STATE/baremetal.env; openstack baremetal node list   # the same with the openstack client
  bin/corral dev down --state-dir $STATE --purge   # stop everything
MSG
