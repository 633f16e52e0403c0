#!/usr/bin/env bash
# Backup benchmark on the devcluster: the operator's RedisClusterBackup vs redis-cli --rdb
# per master in parallel, and its restore (spec.restoreFrom) vs redis-cli --pipe per master
# in parallel, on the same keys in the same run (bin/manager is built, the devcluster started
# when it is not up, holding /tmp/rcop-devcluster.lock unless the caller already holds it:
# DEVCLUSTER_LOCK_HELD=1). Arguments go to the program, e.g. ./run.sh -keys 1000000 -rounds 3
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ -z "${DEVCLUSTER_LOCK_HELD:-}" ]]; then
	exec env DEVCLUSTER_LOCK_HELD=1 flock /tmp/rcop-devcluster.lock "$0" "$@"
fi
go build -o bin/bench-backup ./bench/backup
exec bin/bench-backup "$@"
