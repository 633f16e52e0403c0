#!/usr/bin/env bash
# Builds the container runtime for the devcluster's nodes (containerd, containerd-shim-runc-v2,
# ctr) from the tool module in hack/devcluster/runtime into bin/. runc and the CNI plugins come
# from Debian (hack/devcluster/install-node-packages.sh).
#
# Rebuilds only when a binary is missing or the pin changed: the pin is a hash of the tool
# module's go.mod, go.sum, main packages, build tags and the version stamped in, kept in
# bin/.devcluster-runtime.stamp. A cold build takes about 4 minutes on 2 cores; a warm one seconds.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
MOD=$ROOT/hack/devcluster/runtime

CONTAINERD_VERSION=v2.4.2 # must match the require in hack/devcluster/runtime/go.mod
# CGO off and no snapshotters that need C headers or are not used here: overlayfs and native stay.
TAGS="urfave_cli_no_docs no_btrfs no_devmapper no_zfs"
# As upstream's Makefile does: the shim carries no gRPC server code.
SHIM_TAGS="$TAGS no_grpc"
BINARIES=(containerd containerd-shim-runc-v2 ctr)

pin() {
	(cd "$MOD" && cat go.mod go.sum ./*/main.go && echo "$CONTAINERD_VERSION $TAGS $SHIM_TAGS $(go env GOVERSION)") | sha256sum | cut -d' ' -f1
}

STAMP=$BIN/.devcluster-runtime.stamp
want=$(pin)
if stamp_current "$STAMP" "$want" "${BINARIES[@]}"; then
	echo "runtime binaries are current (containerd $CONTAINERD_VERSION)"
	exit 0
fi

got=$(cd "$MOD" && go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)
if [[ $got != "$CONTAINERD_VERSION" ]]; then
	echo "hack/devcluster/runtime/go.mod pins containerd $got, this script says $CONTAINERD_VERSION" >&2
	exit 1
fi

mkdir -p "$BIN"
echo "Building ${BINARIES[*]} (containerd $CONTAINERD_VERSION) into bin/; a cold build takes about 4 minutes"
start=$(date +%s)
PKG=github.com/containerd/containerd/v2
LDFLAGS="-s -w -X $PKG/version.Version=$CONTAINERD_VERSION -X $PKG/version.Package=$PKG -X $PKG/version.Revision=gomod"
export CGO_ENABLED=0
(cd "$MOD" && go build -trimpath -tags "$TAGS" -ldflags "$LDFLAGS" -o "$BIN/" ./containerd ./ctr)
(cd "$MOD" && go build -trimpath -tags "$SHIM_TAGS" -ldflags "$LDFLAGS" -o "$BIN/" ./containerd-shim-runc-v2)
echo "$want" >"$STAMP"
echo "Built in $(($(date +%s) - start))s"
