#!/usr/bin/env bash
# Scale benchmark: redis-cli --cluster rebalance vs the operator's redis.Scale moving slots
# onto a fourth master and off it again, on fresh redis-server processes, in the same run.
# Arguments go to the program, e.g. ./run.sh -rounds 5 -keys 200000
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./bench/scale "$@"
