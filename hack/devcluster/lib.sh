# Shared by up.sh and down.sh: where the state lives and how processes are started and stopped.
# Every process is tracked by a pid file and stopped by that PID only, never by name.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$ROOT/bin
STATE=${DEVCLUSTER_STATE:-$ROOT/.devcluster}
ETCD_PORT=${DEVCLUSTER_ETCD_PORT:-23790}
ETCD_PEER_PORT=${DEVCLUSTER_ETCD_PEER_PORT:-23800}
API_PORT=${DEVCLUSTER_API_PORT:-6443}
NODES=${DEVCLUSTER_NODES:-3}
KUBECONFIG_FILE=$STATE/kubeconfig

# The pod network lives in 198.18.0.0/15 (a benchmark range no one routes), inside this machine:
# the control plane's address and the nodes' on the link rcop0, each node's pods on its bridge
# rcopnN (198.19.N.0/24), Services' cluster IPs in 198.18.128.0/17, load balancers' addresses in
# 198.18.1.0/24. Nothing in it is routed out.
NET_RANGE=198.18.0.0/15
API_IP=198.18.0.1
CLUSTER_CIDR=198.19.0.0/16
SERVICE_CIDR=198.18.128.0/17
KUBERNETES_SVC_IP=198.18.128.1
# Load balancers' addresses (loadbalancer.sh): 198.18.1.2 to .254, routed to rcop0 like the
# cluster IPs, served by kube-proxy.
LB_RANGE=198.18.1.0/24
LB_FIRST=2
LB_LAST=254
lb_ip() { echo "198.18.1.$1"; }
node_name() { echo "devnode-$1"; }
node_ip() { echo "198.18.0.$((10 + $1))"; }
node_pod_cidr() { echo "198.19.$1.0/24"; }
node_bridge() { echo "rcopn$1"; }
# Node state (kubelet root, containerd root and sockets) lives at short paths of its own, not
# under the checkout: a unix socket's path has at most 107 bytes. CHECKOUT_ID tells two
# checkouts' directories apart.
CHECKOUT_ID=$(echo -n "$ROOT" | sha256sum | cut -c1-8)
NODE_LIB=/var/lib/rcop-$CHECKOUT_ID
NODE_RUN=/run/rcop-$CHECKOUT_ID

log() { echo "devcluster: $*" >&2; }

# stamp_current STAMP PIN BINARY...: true when every BINARY is in bin/ and STAMP holds PIN, the
# hash of whatever decides what they are (build.sh, build-runtime.sh).
stamp_current() {
	local stamp=$1 pin=$2 b
	shift 2
	for b in "$@"; do
		[[ -x $BIN/$b ]] || return 1
	done
	[[ -f $stamp && $(cat "$stamp") == "$pin" ]]
}

# pid_alive PIDFILE EXPECTED: true when the recorded PID runs a command line containing EXPECTED
# (so a PID reused by an unrelated process is never mistaken for ours).
pid_alive() {
	local pidfile=$1 expected=$2 pid
	[[ -f $pidfile ]] || return 1
	pid=$(cat "$pidfile")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[[ -r /proc/$pid/cmdline ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$expected"
}

# start_proc NAME CMD...: starts CMD in its own session (so a Ctrl-C in the caller's terminal
# does not reach it), logs to $STATE/logs/NAME.log and records its PID in $STATE/pids/NAME.pid.
start_proc() {
	local name=$1
	shift
	mkdir -p "$STATE/logs" "$STATE/pids"
	setsid "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$STATE/pids/$name.pid"
}

# stop_pid PIDFILE EXPECTED: SIGTERM, wait up to 15s, then SIGKILL; removes the pid file.
stop_pid() {
	local pidfile=$1 expected=$2 pid i
	if pid_alive "$pidfile" "$expected"; then
		pid=$(cat "$pidfile")
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 150; i++)); do
			pid_alive "$pidfile" "$expected" || break
			sleep 0.1
		done
		if pid_alive "$pidfile" "$expected"; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$pidfile"
}

kubectl_dc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
