#!/usr/bin/env bash
# Scale benchmark: redis-cli --cluster rebalance vs the operator's redis.Scale moving slots
# onto a fourth master and off it again, on fresh redis-server processes, in the same run;
# with -devcluster also the whole operator scaling the demo RedisCluster 6 -> 8 -> 6 pods on
# the devcluster (bin/manager is built, the devcluster started when it is not up, holding
# /tmp/devcluster.lock unless the caller already holds it: DEVCLUSTER_LOCK_HELD=1).
# Arguments go to the program, e.g. ./run.sh -rounds 5 -keys 200000 -devcluster
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ " $* " == *" -devcluster "* && -z "${DEVCLUSTER_LOCK_HELD:-}" ]]; then
	exec env DEVCLUSTER_LOCK_HELD=1 flock /tmp/devcluster.lock "$0" "$@"
fi
go build -o bin/manager .
go build -o bin/bench-scale ./bench/scale
exec bin/bench-scale "$@"
