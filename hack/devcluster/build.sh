#!/usr/bin/env bash
# Builds the local control plane (kube-apiserver, kube-controller-manager, kubectl, etcd)
# from the tool module in hack/devcluster/tools into bin/.
#
# Rebuilds only when a binary is missing or the pin changed: the pin is a hash of the tool
# module's go.mod, go.sum, main packages and the version stamped in, kept in bin/.devcluster-tools.stamp.
# A cold build takes about 10 minutes on 2 cores and ~2.5 GB of Go build cache; current: no build.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
TOOLS=$ROOT/hack/devcluster/tools

KUBE_VERSION=v1.36.3
KUBE_MAJOR=1
KUBE_MINOR=36
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd criclean provisioner)

pin() {
	# Everything that decides what the binaries are: the module pins, the main packages, the version.
	(cd "$TOOLS" && cat go.mod go.sum ./*/main.go && echo "$KUBE_VERSION $KUBE_MAJOR $KUBE_MINOR") | sha256sum | cut -d' ' -f1
}

STAMP=$BIN/.devcluster-tools.stamp
want=$(pin)
if stamp_current "$STAMP" "$want" "${BINARIES[@]}"; then
	echo "devcluster binaries are current ($KUBE_VERSION)"
	exit 0
fi

mkdir -p "$BIN"
echo "Building ${BINARIES[*]} ($KUBE_VERSION) into bin/; a cold build takes about 10 minutes"
start=$(date +%s)
VPKG=k8s.io/component-base/version
(cd "$TOOLS" && go build -ldflags "-s -w -X $VPKG.gitVersion=$KUBE_VERSION -X $VPKG.gitMajor=$KUBE_MAJOR -X $VPKG.gitMinor=$KUBE_MINOR" \
	-o "$BIN/" $(printf "./%s " "${BINARIES[@]}"))
echo "$want" >"$STAMP"
echo "Built in $(($(date +%s) - start))s"
