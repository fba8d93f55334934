#!/usr/bin/env bash
# Installs the Debian packages Corral needs to build, run and test: qemu for
# the kvm hypervisor, e2fsprogs and busybox-static for the tiny OS and the
# guest image, iproute2 for taps and bridges, etcd-server for the etcd store
# backend and etcd-client for restoring its snapshots, systemd for
# systemd-analyze, systemd-sysusers and systemd-tmpfiles, which check the
# packaged units (they need no running systemd), nftables for the pool
# firewall's tests; ganeti (3.0 on Debian 12) and ganeti-os-noop for the
# tests that run Ganeti's own gnt-* tools and burnin against Corral's drop-in
# mode, with openssh-server, fping and curl for the moves between a real
# Ganeti and Corral (that e2e test starts and stops its Ganeti itself; the
# package's daemons are not kept running: see below); for bare metal,
# openipmi (ipmi_sim, a real BMC) and ipmitool, xorriso, isolinux and
# syslinux-common (virtual-media ISOs), dnsmasq-base and ipxe-qemu (PXE),
# python3-sushy (a Redfish client checking Corral's BMC emulator) and
# python3-openstackclient with python3-ironicclient (the unchanged
# `openstack baremetal` client); ceph-mon, ceph-mgr, ceph-osd and
# ceph-common for the rbd disk template's tests (a one-host Ceph in user
# space, internal/cephtest) with qemu-block-extra (qemu's rbd driver);
# containerd, runc and containernetworking-plugins for the kubelet workers
# of COE clusters (corral-node runs its own containerd per kube node; the
# package's service is not kept running: see below).
# Idempotent; needs root.
set -euo pipefail
pkgs=(qemu-system-x86 qemu-utils qemu-block-extra ceph-mon ceph-mgr ceph-osd ceph-common socat busybox-static cpio e2fsprogs iproute2 lz4 make gcc etcd-server etcd-client python3-ganeti-rapi systemd nftables ganeti ganeti-os-noop openssh-server fping curl openipmi ipmitool xorriso isolinux syslinux-common dnsmasq-base ipxe-qemu python3-sushy python3-openstackclient python3-ironicclient python3-magnumclient containerd runc containernetworking-plugins)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}"
  # The drop-in tests use only Ganeti's tools against a test root, and the
  # move test starts and stops its own Ganeti: stop what the package may
  # have started (nothing runs before a cluster exists, but be sure).
  if [[ " ${missing[*]} " == *" ganeti "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now ganeti.service ganeti.target 2>/dev/null || true
  fi
  # Corral starts its own etcd members (internal/etcdproc); the package's
  # default member would only sit on ports 2379 and 2380.
  if [[ " ${missing[*]} " == *" etcd-server "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now etcd.service || true
  fi
  # Likewise each kubelet worker has a containerd of its own, with its own
  # sockets and directories; the host's would only hold /run/containerd.
  if [[ " ${missing[*]} " == *" containerd "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now containerd.service || true
  fi
fi
# The guest image build downloads the kernel and busybox packages with
# apt-get download; make sure the package lists exist.
if ! apt-cache show linux-image-cloud-amd64 >/dev/null 2>&1; then
  apt-get update -q
fi
