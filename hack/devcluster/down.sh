#!/usr/bin/env bash
# Stops everything up.sh started, by the PIDs it recorded, removes what the nodes made on the host
# (pod sandboxes, containers, mounts, cgroups, links, the nftables tables, kernel settings) and
# wipes the cluster's data so the next up.sh starts clean. Certificates and logs are kept.
#   DEVCLUSTER_KEEP_DATA=1   keep etcd data and the claims' volumes
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/certs.sh"
source "$(dirname "$0")/nodes.sh"

# The demo's operator, when it runs one, then the nodes (pods go with them), then the control plane.
stop_pid "$STATE/pids/manager.pid" "$BIN/manager"
stop_pid "$STATE/pids/loadbalancer.pid" "loadbalancer.sh"
nodes_down
stop_pid "$STATE/pids/provisioner.pid" "$BIN/provisioner"
stop_pid "$STATE/pids/kube-scheduler.pid" "$BIN/kube-scheduler"
stop_pid "$STATE/pids/kube-controller-manager.pid" "$BIN/kube-controller-manager"
stop_pid "$STATE/pids/kube-apiserver.pid" "$BIN/kube-apiserver"
stop_pid "$STATE/pids/etcd.pid" "$BIN/etcd"
net_down

if [[ -z ${DEVCLUSTER_KEEP_DATA:-} ]]; then
	rm -rf "$STATE/etcd" "$STATE/volumes"
fi
log "down"
