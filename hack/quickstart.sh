#!/usr/bin/env bash
# Runs the README's quick start as a newcomer would (the first sh block under "## Quick start",
# with `make demo` returning instead of waiting), checks what it prints (cluster_state:ok, the
# key read back through redirects), then where it leaves the cluster: Running again at 8 pods
# and 4 masters after the scale-out it asks for. The caller
# stops the devcluster (make demo-down).
set -euo pipefail
cd "$(dirname "$0")/.."
block=$(awk '/^## Quick start/ {q = 1} q && /^```sh$/ {on = 1; next} on && /^```$/ {exit} on {print}' README.md)
[[ -n $block ]] || { echo "quickstart: no sh block under ## Quick start in README.md" >&2; exit 1; }
echo "quickstart: running README.md's quick start:"
echo "$block" | sed 's/^/    /'
out=$(DEMO_WAIT=0 bash -euo pipefail -c "$block" 2>&1 | tee /dev/stderr)
# What the reader is promised to see: a healthy cluster, and a key written and read back
# through redirects.
grep -q '^cluster_state:ok' <<<"$out" || { echo "quickstart: redis-cli cluster info did not say cluster_state:ok" >&2; exit 1; }
grep -qx 'world' <<<"$out" || { echo "quickstart: redis-cli -c get hello did not give back world" >&2; exit 1; }

K="bin/kubectl --kubeconfig .devcluster/kubeconfig"
for ((i = 0; i < 300; i += 2)); do
	state=$($K get rec demo -o jsonpath='{.status.phase} {.status.replicas} {.status.masters}')
	[[ $state == "Running 8 4" ]] && { echo "quickstart: demo is $state after the scale-out"; exit 0; }
	sleep 2
done
echo "quickstart: demo is '$state' 300 s after the quick start's scale-out, want 'Running 8 4'" >&2
exit 1
