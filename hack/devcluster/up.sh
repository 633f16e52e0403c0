#!/usr/bin/env bash
# Starts the local Kubernetes: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# the storage provisioner, kube-proxy and the nodes (a kubelet and a containerd each), with the
# pod network in 198.18.0.0/15 (nodes.sh) and state under .devcluster/ (pids, logs, certs,
# kubeconfig) and the nodes' own directories (NODE_LIB, NODE_RUN in lib.sh).
# Idempotent: what already runs is left running. Stop everything with down.sh. Needs root.
#
#   DEVCLUSTER_NODES=3          nodes (devnode-1..N)
#   DEVCLUSTER_API_PORT=6443    kube-apiserver's secure port on 198.18.0.1
#   DEVCLUSTER_NO_NODES=1       start only the control plane
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/certs.sh"
source "$(dirname "$0")/nodes.sh"
cd "$ROOT"

[[ $(id -u) == 0 ]] || { log "the devcluster's nodes need root (network, mounts, cgroups)"; exit 1; }
"$ROOT/hack/devcluster/build.sh"
if [[ -z ${DEVCLUSTER_NO_NODES:-} ]]; then
	"$ROOT/hack/devcluster/install-node-packages.sh"
	"$ROOT/hack/devcluster/build-runtime.sh"
	"$ROOT/hack/devcluster/images.sh"
fi
command -v redis-server >/dev/null || "$ROOT/hack/install-redis.sh"

start=$(date +%s)
mkdir -p "$STATE"
net_up
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
	log "starting kube-apiserver on https://$API_IP:$API_PORT"
	start_proc kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address "$API_IP" --advertise-address "$API_IP" --secure-port "$API_PORT" \
		--cert-dir "$C" --tls-cert-file "$C/apiserver.crt" --tls-private-key-file "$C/apiserver.key" \
		--client-ca-file "$C/ca.crt" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$C/sa.pub" --service-account-signing-key-file "$C/sa.key" \
		--authorization-mode Node,RBAC \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--kubelet-client-certificate "$C/admin.crt" --kubelet-client-key "$C/admin.key" \
		--kubelet-certificate-authority "$C/ca.crt" --kubelet-preferred-address-types InternalIP \
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
	# A node that stops reporting gets NotReady, tainted, and its pods evicted, as on any cluster.
	controllers+=,node-lifecycle-controller,taint-eviction-controller,ttl-controller
	start_proc kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig "$KUBECONFIG_FILE" \
		--authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
		--bind-address 127.0.0.1 --secure-port 0 \
		--service-account-private-key-file "$C/sa.key" --root-ca-file "$C/ca.crt" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--controllers "$controllers" --leader-elect=false --v 1
fi

if ! pid_alive "$STATE/pids/kube-scheduler.pid" "$BIN/kube-scheduler"; then
	log "starting kube-scheduler"
	start_proc kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$KUBECONFIG_FILE" \
		--authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
		--bind-address 127.0.0.1 --secure-port 0 --leader-elect=false --v 1
fi

if ! pid_alive "$STATE/pids/provisioner.pid" "$BIN/provisioner"; then
	log "starting the storage provisioner"
	start_proc provisioner "$BIN/provisioner" --kubeconfig "$KUBECONFIG_FILE" --dir "$STATE/volumes"
fi

if [[ -z ${DEVCLUSTER_NO_NODES:-} ]]; then
	for ((n = 1; n <= NODES; n++)); do node_up "$n"; done
	if ! pid_alive "$STATE/pids/kube-proxy.pid" "$BIN/kube-proxy"; then
		log "starting kube-proxy (nftables)"
		cat >"$STATE/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: $KUBECONFIG_FILE}
hostnameOverride: $(node_name 1)
clusterCIDR: $CLUSTER_CIDR
nodePortAddresses: ["198.18.0.0/24"]
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Leave the host's conntrack settings as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
		start_proc kube-proxy "$BIN/kube-proxy" --config "$STATE/kube-proxy.yaml" --v 1
	fi
	if ! pid_alive "$STATE/pids/loadbalancer.pid" "loadbalancer.sh"; then
		log "starting the load balancer (addresses in $LB_RANGE)"
		start_proc loadbalancer bash "$ROOT/hack/devcluster/loadbalancer.sh"
	fi
	for ((i = 0; ; i++)); do
		ready=$(kubectl_dc get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True || true)
		((ready >= NODES)) && break
		if ((i > 240)); then
			log "nodes not Ready after 120s; see $STATE/logs/kubelet-*.log"
			tail -20 "$STATE"/logs/kubelet-*.log >&2
			exit 1
		fi
		sleep 0.5
	done
fi

log "up in $(($(date +%s) - start))s; export KUBECONFIG=$KUBECONFIG_FILE"
