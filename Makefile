# Corral build and test entry points.
GO ?= go
BIN := bin

.PHONY: deps build test test-short vet fmt guest-image k8s-tools clean

# Debian packages the build, the daemons and the tests need (idempotent).
deps:
	scripts/install-deps.sh

# The CLI is built without cgo: a static binary starts without the dynamic
# loader, and every corral call pays for its start (BENCHMARKS.md, "Starting
# the CLI"). Its user lookups read /etc/passwd and /etc/group and its host
# names go through Go's own resolver. The daemons keep the system's NSS.
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/corral
	$(GO) build -o $(BIN)/ ./cmd/corrald ./cmd/corral-node ./cmd/corral-rapi

# The whole suite: unit tests with -race, then the end-to-end tests that
# start real daemons (they need root; CI runs as root).
test: deps build
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 60m ./...

test-short:
	$(GO) test -race -short ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w cmd internal test bench

# Kernel and initramfs for kvm guests, built offline from Debian packages.
guest-image:
	scripts/build-guest-image.sh /var/lib/corral/images/tiny

# The Kubernetes control plane of COE clusters (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kwok and its stage
# configs, etcd), built from the pinned modules in tools/k8s. A stamp file
# makes it a no-op when the same versions are already built; the cold
# build takes about ten minutes on two cores, so CI caches K8S_TOOLS_DIR.
K8S_TOOLS_DIR ?= /var/cache/corral/k8s-v1.37.2/bin
k8s-tools:
	GO=$(GO) tools/k8s/build.sh $(K8S_TOOLS_DIR)

clean:
	rm -rf $(BIN)
