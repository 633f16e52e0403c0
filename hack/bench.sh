#!/usr/bin/env bash
# `make bench`: every benchmark, each beside its reference where it has one.
#   render:    BenchmarkRender (ns/op, allocs/op) on one core
#   bootstrap: redis.Bootstrap vs redis-cli --cluster create on fresh redis-servers
#   operator:  the whole operator on the devcluster vs redis-cli --cluster create
#   scale:     redis.Scale vs redis-cli --cluster rebalance moving slots out to a fourth
#              master and back, 1,000,000 keys (SCALE_KEYS), 3 rounds at least; and the
#              whole operator scaling the demo RedisCluster 6 -> 8 -> 6 pods on the devcluster
#   backup:    the operator's RedisClusterBackup vs redis-cli --rdb per master, and its
#              restore (spec.restoreFrom) vs redis-cli --pipe per master, BACKUP_KEYS keys
#              (default 1,000,000) on the devcluster, 3 rounds; then again with -pin (the
#              servers on CPU 0, the operator, the store and redis-cli on CPU 1: on 2 cores,
#              the nearest to an operator and a store on other machines than the masters)
#   scale-valkey: on Valkey 9.1 (the project's image), the operator's atomic slot migration
#              (CLUSTER MIGRATESLOTS) vs its legacy MIGRATE mover vs valkey-cli --cluster
#              rebalance, same data, same run, 1,000,000 keys (SCALE_KEYS), 3 rounds at least
#   fleet:     one operator, FLEET_CLUSTERS RedisClusters (default 10, what a 2-core machine
#              holds comfortably), idle cost over FLEET_IDLE (default 5m), change-to-action
#   ROUNDS=5   rounds of the two Redis benchmarks
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/bin:$PATH
rounds=${ROUNDS:-5}
make --no-print-directory devcluster-bins redis-server
echo "=== render"
go test -run '^$' -bench Render -benchmem -cpu 1 ./render/
echo "=== bootstrap"
bench/bootstrap/run.sh -rounds "$rounds"
echo "=== operator"
bench/operator/run.sh -rounds "$rounds"
echo "=== scale"
bench/scale/run.sh -rounds "$(( rounds < 3 ? 3 : rounds ))" -keys "${SCALE_KEYS:-1000000}" -devcluster
echo "=== backup"
bench/backup/run.sh -keys "${BACKUP_KEYS:-1000000}" -rounds 3
echo "=== backup, servers on a core of their own (-pin)"
bench/backup/run.sh -keys "${BACKUP_KEYS:-1000000}" -rounds 3 -pin
echo "=== scale-valkey"
hack/devcluster/images.sh valkey-9.1
bench/scale/run.sh -valkey -rounds "$(( rounds < 3 ? 3 : rounds ))" -keys "${SCALE_KEYS:-1000000}"
echo "=== fleet"
bench/fleet/run.sh -clusters "${FLEET_CLUSTERS:-10}" -idle "${FLEET_IDLE:-5m}"
