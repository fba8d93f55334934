# Corral build and test entry points.
GO ?= go
BIN := bin

.PHONY: deps build test test-short vet fmt guest-image clean

# Debian packages the build, the daemons and the tests need (idempotent).
deps:
	scripts/install-deps.sh

build:
	$(GO) build -o $(BIN)/ ./cmd/corral ./cmd/corrald ./cmd/corral-node ./cmd/corral-rapi

# The whole suite: unit tests with -race, then the end-to-end tests that
# start real daemons (they need root; CI runs as root).
test: deps build
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

test-short:
	$(GO) test -race -short ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w cmd internal test bench

# Kernel and initramfs for kvm guests, built offline from Debian packages.
guest-image:
	scripts/build-guest-image.sh /var/lib/corral/images/tiny

clean:
	rm -rf $(BIN)
