#!/usr/bin/env bash
# Operator benchmark: the whole operator forming the demo RedisCluster on the devcluster vs
# redis-cli --cluster create on 6 fresh redis-server processes, in the same run.
# Builds bin/manager, starts the devcluster when it is not up (and stops it at the end only
# then), installs the CRD and runs the operator as its own process, stopped by PID.
# Arguments go to the program, e.g. ./run.sh -rounds 5
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/manager .
go build -o bin/bench-operator ./bench/operator
exec bin/bench-operator "$@"
