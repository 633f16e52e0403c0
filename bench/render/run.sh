#!/usr/bin/env bash
# Render benchmarks on one core: a full CUE evaluation of the seed's sample, the cached
# repeat render of an unchanged CR, and the one-time compile. The cpu-ns/op column is
# the process CPU time per render, steadier than ns/op on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
go test -bench 'Render|Compile' -benchmem -run '^$' -count "${COUNT:-3}" ./render/ -cpu 1
