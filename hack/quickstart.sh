#!/usr/bin/env bash
# Runs the README's quick start as a newcomer would (the first sh block under "## Quick start",
# line by line, with `make demo` returning instead of waiting), then checks where it leaves the
# cluster: Running again at 8 pods and 4 masters after the scale-out it asks for. The caller
# stops the devcluster (make demo-down).
set -euo pipefail
cd "$(dirname "$0")/.."
block=$(awk '/^## Quick start/ {q = 1} q && /^```sh$/ {on = 1; next} on && /^```$/ {exit} on {print}' README.md)
[[ -n $block ]] || { echo "quickstart: no sh block under ## Quick start in README.md" >&2; exit 1; }
echo "quickstart: running README.md's quick start:"
echo "$block" | sed 's/^/    /'
DEMO_WAIT=0 bash -euo pipefail -c "$block"

K="bin/kubectl --kubeconfig .devcluster/kubeconfig"
for ((i = 0; i < 300; i += 2)); do
	state=$($K get rec demo -o jsonpath='{.status.phase} {.status.replicas} {.status.masters}')
	[[ $state == "Running 8 4" ]] && { echo "quickstart: demo is $state after the scale-out"; exit 0; }
	sleep 2
done
echo "quickstart: demo is '$state' 300 s after the quick start's scale-out, want 'Running 8 4'" >&2
exit 1
