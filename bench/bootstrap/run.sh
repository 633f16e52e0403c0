#!/usr/bin/env bash
# Bootstrap benchmark: redis-cli --cluster create vs the operator's Bootstrap on 6 fresh
# redis-server processes. Arguments go to the program, e.g. ./run.sh -rounds 9
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./bench/bootstrap "$@"
