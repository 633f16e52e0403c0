#!/usr/bin/env bash
# `make test-matrix`: the end-to-end tests that prove each path of the operator (bootstrap,
# healing a lost master, scale-out and scale-in with slot migration, a rolling upgrade), run
# once per server besides the default, which `make test` runs whole. Not part of `make test`
# nor of .ci/run: a server's pass takes minutes, and the whole fault suite on three servers
# far longer than CI's hour (docs/servers.md#the-fault-suite-on-every-server). `make test`
# runs one of its paths on Valkey 9.1 itself: TestFaultBigKeyMovesOnValkey.
#
#   MATRIX_SERVERS  the servers, as REPOSITORY:VERSION (default: the three newer ones)
#   MATRIX_TESTS    the tests, a `go test -run` pattern (default: the paths' subset;
#                   'Fault|Migration' runs the whole fault suite)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/bin:$PATH

servers=${MATRIX_SERVERS:-library/redis:8.0 valkey/valkey:8.1 valkey/valkey:9.1}
tests=${MATRIX_TESTS:-^(TestRedisClusterLifecycle|TestFaultMasterProcessKilled|TestFaultAllPodsDeleted|TestScaleOutAndIn|TestFaultBigKeyMoves|TestFaultOperatorKilledMidMigration|TestMigrationAbortScaleOut|TestUpgradeFailsMastersOverBeforeRestart)$}

make --no-print-directory tools
failed=()
for server in $servers; do
	echo
	echo "=== $server: $tests ($(date +%T))"
	start=$(date +%s)
	if E2E_SERVER=$server go test -tags e2e -count=1 -p 1 -timeout 60m -v -run "$tests" ./test/e2e/; then
		echo "=== $server: passed in $(($(date +%s) - start))s"
	else
		echo "=== $server: FAILED after $(($(date +%s) - start))s"
		failed+=("$server")
	fi
done
if ((${#failed[@]})); then
	echo "test-matrix failed on: ${failed[*]}"
	exit 1
fi
echo "test-matrix passed on: $servers"
