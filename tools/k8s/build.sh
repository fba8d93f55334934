#!/bin/bash
# Builds the pinned Kubernetes control plane binaries of COE clusters into
# one directory, from the Go module proxy (never downloaded prebuilt):
#   kube-apiserver kube-controller-manager kube-scheduler kubelet  (k8s.io/kubernetes)
#   kwok and its stage configs in stages/                           (sigs.k8s.io/kwok)
#   etcd                                                            (go.etcd.io/etcd/server/v3)
# Usage: build.sh OUTDIR. A stamp file in OUTDIR records what was built
# from which module files; when it matches, nothing is rebuilt, so a CI
# cache of OUTDIR makes the ~10 minute cold build a one-time cost.
set -euo pipefail

OUT=${1:?usage: build.sh OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
GO=${GO:-go}

KUBE_VERSION=v1.37.2
KWOK_VERSION=v0.8.0
ETCD_VERSION=v3.6.16
STAMP=$OUT/.corral-k8s-tools
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kwok etcd)
STAGES=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
	pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml)

# What the stamp says: the pinned versions and the module files that pin
# everything below them. Editing a go.mod or go.sum rebuilds.
want_stamp() {
	echo "kubernetes $KUBE_VERSION kwok $KWOK_VERSION etcd $ETCD_VERSION"
	(cd "$HERE" && sha256sum build.sh kubernetes/go.mod kubernetes/go.sum kwok/go.mod kwok/go.sum etcd/go.mod etcd/go.sum)
}

up_to_date() {
	[ -f "$STAMP" ] || return 1
	[ "$(cat "$STAMP")" = "$(want_stamp)" ] || return 1
	local b s
	for b in "${BINARIES[@]}"; do [ -x "$OUT/$b" ] || return 1; done
	for s in "${STAGES[@]}"; do [ -f "$OUT/stages/$(basename "$s")" ] || return 1; done
}

if up_to_date; then
	echo "k8s tools in $OUT are up to date (kubernetes $KUBE_VERSION, kwok $KWOK_VERSION, etcd $ETCD_VERSION)"
	exit 0
fi

mkdir -p "$OUT/stages"
rm -f "$STAMP"

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
KUBE_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
echo "building kube-apiserver kube-controller-manager kube-scheduler kubelet $KUBE_VERSION"
"$GO" -C "$HERE/kubernetes" build -trimpath -ldflags "$KUBE_LDFLAGS" -o "$OUT/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet

echo "building kwok $KWOK_VERSION"
"$GO" -C "$HERE/kwok" build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
	-o "$OUT/kwok" sigs.k8s.io/kwok/cmd/kwok
kwok_dir=$("$GO" -C "$HERE/kwok" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
for s in "${STAGES[@]}"; do
	install -m 0644 "$kwok_dir/kustomize/stage/$s" "$OUT/stages/$(basename "$s")"
done

echo "building etcd $ETCD_VERSION"
"$GO" -C "$HERE/etcd" build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3

want_stamp > "$STAMP"
echo "k8s tools built in $OUT"
