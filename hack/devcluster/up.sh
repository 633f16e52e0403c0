#!/usr/bin/env bash
# Starts the local Kubernetes: etcd, kube-apiserver, kube-controller-manager and the node agent,
# each on loopback, with state under .devcluster/ (pids, logs, certs, kubeconfig).
# Idempotent: what already runs is left running. Stop everything with down.sh.
#
#   DEVCLUSTER_NODES=3          nodes the agent registers (devnode-1..N)
#   DEVCLUSTER_API_PORT=6443    kube-apiserver's secure port on 127.0.0.1
#   DEVCLUSTER_NO_AGENT=1       start only the control plane
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/certs.sh"
cd "$ROOT"

for b in etcd kube-apiserver kube-controller-manager kubectl; do
	[[ -x $BIN/$b ]] || { "$ROOT/hack/devcluster/build.sh"; break; }
done
command -v redis-server >/dev/null || "$ROOT/hack/install-redis.sh"

start=$(date +%s)
mkdir -p "$STATE"
make_certs
write_kubeconfig
C=$STATE/certs

if ! pid_alive "$STATE/pids/etcd.pid" "$BIN/etcd"; then
	log "starting etcd on 127.0.0.1:$ETCD_PORT"
	start_proc etcd "$BIN/etcd" --name devcluster --data-dir "$STATE/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "devcluster=http://127.0.0.1:$ETCD_PEER_PORT" \
		--listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 2))" \
		--quota-backend-bytes 2147483648 --log-level warn
fi

if ! pid_alive "$STATE/pids/kube-apiserver.pid" "$BIN/kube-apiserver"; then
	log "starting kube-apiserver on https://127.0.0.1:$API_PORT"
	start_proc kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
		--cert-dir "$C" --tls-cert-file "$C/apiserver.crt" --tls-private-key-file "$C/apiserver.key" \
		--client-ca-file "$C/ca.crt" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$C/sa.pub" --service-account-signing-key-file "$C/sa.key" \
		--authorization-mode Node,RBAC \
		--service-cluster-ip-range 10.96.0.0/16 \
		--allow-privileged=true \
		--enable-priority-and-fairness=false \
		--v 1
fi

log "waiting for kube-apiserver /readyz"
for ((i = 0; ; i++)); do
	if kubectl_dc get --raw /readyz >/dev/null 2>&1; then break; fi
	if ((i > 240)); then
		log "kube-apiserver not ready after 120s; see $STATE/logs/kube-apiserver.log"
		tail -20 "$STATE/logs/kube-apiserver.log" >&2
		exit 1
	fi
	sleep 0.5
done

if ! pid_alive "$STATE/pids/kube-controller-manager.pid" "$BIN/kube-controller-manager"; then
	log "starting kube-controller-manager"
	# The controllers a StatefulSet of Redis pods needs, with real owner-reference cascades and PVC binding.
	controllers=statefulset-controller,garbage-collector-controller,serviceaccount-controller
	controllers+=,serviceaccount-token-controller,namespace-controller,endpointslice-controller
	controllers+=,endpoints-controller,persistentvolume-binder-controller,persistentvolume-protection-controller
	controllers+=,persistentvolumeclaim-protection-controller,root-ca-certificate-publisher-controller
	controllers+=,replicaset-controller,deployment-controller,disruption-controller,pod-garbage-collector-controller
	controllers+=,clusterrole-aggregation-controller,service-cidr-controller
	start_proc kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig "$KUBECONFIG_FILE" \
		--authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
		--bind-address 127.0.0.1 --secure-port 0 \
		--service-account-private-key-file "$C/sa.key" --root-ca-file "$C/ca.crt" \
		--service-cluster-ip-range 10.96.0.0/16 \
		--controllers "$controllers" --leader-elect=false --v 1
fi

if [[ -z ${DEVCLUSTER_NO_AGENT:-} && -d $ROOT/hack/devcluster/nodeagent ]]; then
	if ! pid_alive "$STATE/pids/nodeagent.pid" "$BIN/nodeagent"; then
		log "building and starting the node agent ($NODES nodes)"
		go build -o "$BIN/nodeagent" ./hack/devcluster/nodeagent
		start_proc nodeagent "$BIN/nodeagent" --kubeconfig "$KUBECONFIG_FILE" --state-dir "$STATE" --nodes "$NODES"
	fi
	for ((i = 0; ; i++)); do
		ready=$(kubectl_dc get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True || true)
		((ready >= NODES)) && break
		if ((i > 120)); then
			log "nodes not Ready after 60s; see $STATE/logs/nodeagent.log"
			tail -20 "$STATE/logs/nodeagent.log" >&2
			exit 1
		fi
		sleep 0.5
	done
fi

log "up in $(($(date +%s) - start))s; export KUBECONFIG=$KUBECONFIG_FILE"
