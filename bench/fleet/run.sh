#!/usr/bin/env bash
# Fleet benchmark: one operator, N RedisClusters on the devcluster (see main.go).
# Builds bin/manager, starts the devcluster when it is not up (and stops it at the end only
# then), holding /tmp/devcluster.lock unless the caller already holds it
# (DEVCLUSTER_LOCK_HELD=1). Arguments go to the program, e.g.
#   ./run.sh -clusters 50 -idle 5m
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${DEVCLUSTER_LOCK_HELD:-}" ]; then
	exec env DEVCLUSTER_LOCK_HELD=1 flock /tmp/devcluster.lock "$0" "$@"
fi
# Built as the image builds it (Dockerfile): its memory is what the bench reports.
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/manager .
go build -o bin/bench-fleet ./bench/fleet
exec bin/bench-fleet "$@"
