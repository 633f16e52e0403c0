#!/usr/bin/env bash
# Stops everything up.sh (and the node agent) started, by the PIDs they recorded, and wipes the
# cluster's data so the next up.sh starts clean. Certificates and logs are kept.
#   DEVCLUSTER_KEEP_DATA=1   keep etcd data and pod volumes
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# The agent first, so it does not restart the redis-servers stopped next.
stop_pid "$STATE/pids/nodeagent.pid" "$BIN/nodeagent"
# Every redis-server the agent started, by the pid file it keeps per pod.
shopt -s nullglob
for pidfile in "$STATE"/pods/*/*/redis.pid; do
	stop_pid "$pidfile" redis-server
done
# The demo's operator, when it runs one.
stop_pid "$STATE/pids/manager.pid" "$BIN/manager"
stop_pid "$STATE/pids/kube-controller-manager.pid" "$BIN/kube-controller-manager"
stop_pid "$STATE/pids/kube-apiserver.pid" "$BIN/kube-apiserver"
stop_pid "$STATE/pids/etcd.pid" "$BIN/etcd"

if [[ -z ${DEVCLUSTER_KEEP_DATA:-} ]]; then
	rm -rf "$STATE/etcd" "$STATE/pods" "$STATE/volumes" "$STATE/hostpath" "$STATE/agent"
fi
log "down"
