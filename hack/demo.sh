#!/usr/bin/env bash
# `make demo`: from a fresh clone, builds what is missing, starts the devcluster (control plane
# and real nodes), installs the CRD, runs the operator, applies the sample RedisCluster, waits for it to
# be Running and prints how to reach it. Ctrl-C (or `make demo-down`) stops everything it
# started, by PID.
#   DEMO_TIMEOUT=600   seconds to wait for phase Running
#   DEMO_WAIT=1|0      stay in the foreground until Ctrl-C (default: when run from a terminal)
set -euo pipefail
source "$(dirname "$0")/devcluster/lib.sh"
cd "$ROOT"
SAMPLE=config/samples/redis_v1alpha1_rediscluster.yaml
TIMEOUT=${DEMO_TIMEOUT:-600}
WAIT=${DEMO_WAIT:-$([[ -t 0 ]] && echo 1 || echo 0)}

stop_all() {
	trap - INT TERM
	echo
	log "stopping everything the demo started"
	"$ROOT/hack/devcluster/down.sh"
	exit 0
}
trap stop_all INT TERM

hack/devcluster/up.sh

if compgen -G "config/crd/bases/*.yaml" >/dev/null; then
	log "installing the CRD"
	kubectl_dc apply --server-side -f config/crd/bases
	# Retried: right after creation the CRD has no status for `kubectl wait` to read.
	for ((i = 0; i < 60; i++)); do
		kubectl_dc wait --for condition=established --timeout 5s crd/redisclusters.redis.middleware.hc.cn >/dev/null 2>&1 && break
		sleep 1
	done
else
	log "no CRD in config/crd/bases yet: skipping the CRD, the operator and the sample"
	WAIT_PHASE=0
fi

if [[ -f main.go && -z ${WAIT_PHASE:-} ]]; then
	if ! pid_alive "$STATE/pids/manager.pid" "$BIN/manager"; then
		log "building and starting the operator (log: $STATE/logs/manager.log)"
		go build -o "$BIN/manager" .
		start_proc manager "$BIN/manager" --kubeconfig "$KUBECONFIG_FILE" \
			--metrics-bind-address 127.0.0.1:18080 --metrics-secure=false --health-probe-bind-address 127.0.0.1:18081
	fi
else
	log "no operator main.go yet (or no CRD): the sample will not be reconciled"
	WAIT_PHASE=0
fi

name=
if [[ -f $SAMPLE && -z ${WAIT_PHASE:-} ]]; then
	log "applying $SAMPLE (the demo's own sample: the seed's config/samples/seed_rediscluster.yaml has pause: true, which the operator honours by leaving it alone)"
	kubectl_dc apply --server-side -f "$SAMPLE"
	name=$(kubectl_dc get -f "$SAMPLE" -o jsonpath='{.metadata.name}')
	ns=$(kubectl_dc get -f "$SAMPLE" -o jsonpath='{.metadata.namespace}')
	log "waiting up to ${TIMEOUT}s for rediscluster $ns/$name to be Running"
	for ((i = 0; i < TIMEOUT; i += 2)); do
		phase=$(kubectl_dc get rec -n "$ns" "$name" -o jsonpath='{.status.phase}' 2>/dev/null || true)
		[[ $phase == Running ]] && break
		sleep 2
	done
	if [[ $phase != Running ]]; then
		log "rediscluster $ns/$name is in phase '${phase:-none}' after ${TIMEOUT}s: $(kubectl_dc get rec -n "$ns" "$name" -o jsonpath='{.status.reason}' 2>/dev/null || true)"
		log "operator log: $STATE/logs/manager.log"
	fi
fi

echo
echo "The devcluster is up. To use it:"
echo "  export KUBECONFIG=$KUBECONFIG_FILE PATH=$BIN:\$PATH"
echo "  kubectl get nodes,pods -A"
if [[ -n $name ]]; then
	kubectl_dc get rec -n "$ns" || true
	ip=$(kubectl_dc get pods -n "$ns" -l "app.kubernetes.io/instance=$name" -o jsonpath='{.items[0].status.podIP}' 2>/dev/null || true)
	pod=$(kubectl_dc get pods -n "$ns" -l "app.kubernetes.io/instance=$name" -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
	echo "  kubectl get rec -n $ns"
	echo "  kubectl get pods -n $ns -o wide"
	if [[ -n $ip ]]; then
		echo "  kubectl logs -n $ns $pod -c redis"
		echo "  export REDISCLI_AUTH=\$(kubectl get secret -n $ns $name-auth -o jsonpath='{.data.password}' | base64 -d)   # the generated password"
		echo "  redis-cli -h $ip cluster info"
		echo "  redis-cli -c -h $ip -p 6379          # from this machine, which routes to the pods"
	fi
fi
echo "  curl -s http://127.0.0.1:18080/metrics | grep ^redis_operator_   # the operator's metrics (docs/metrics.md)"
echo "Stop it with Ctrl-C here, or: make demo-down"

if [[ $WAIT == 1 ]]; then
	while true; do sleep 3600 & wait $!; done
fi
trap - INT TERM
