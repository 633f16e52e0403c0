#!/usr/bin/env bash
# Builds versitygw (the S3-compatible server the backup tests write to, with its posix
# backend) from the tool module hack/devcluster/s3gw into bin/versitygw, only when it is
# missing or its pin (go.mod, go.sum) changed. Run by the tests that need it
# (redistest.StartS3), not by `make tools`. Cold (empty GOCACHE and module cache for it) it
# took 2m07s on 2 cores shared with other builds (load 8), SeaweedFS 4m55s measured alike.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
MOD=$ROOT/hack/devcluster/s3gw
STAMP=$BIN/.s3gw.stamp
want=$(cd "$MOD" && cat go.mod go.sum | sha256sum | cut -d' ' -f1)
if stamp_current "$STAMP" "$want" versitygw; then
	exit 0
fi
mkdir -p "$BIN"
echo "Building versitygw into bin/; a cold build takes 2 to 3 minutes" >&2
start=$(date +%s)
(cd "$MOD" && go build -ldflags "-s -w" -o "$BIN/versitygw" github.com/versity/versitygw/cmd/versitygw)
echo "$want" >"$STAMP"
echo "Built versitygw in $(($(date +%s) - start))s" >&2
