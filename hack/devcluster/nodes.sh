# Sourced by up.sh and down.sh: the pod network and the nodes. Each node is a real kubelet with
# its own containerd (runc, the standard CNI bridge plugin), on this machine's network namespace:
# node N has the address 198.18.0.(10+N) on rcop0 and its pods on the bridge rcopnN. One
# kube-proxy (nftables) serves the Services for all of them, since they share the namespace.
#
# Each node's kubelet and containerd share a mount namespace of their own (kept at
# $NODE_RUN/NAME/mnt), so the node's mounts (volumes, secrets, container root filesystems) stay
# out of the host's and go with it, and the node has its own copy of the host directories in
# NODE_HOST_DIRS (hostPath volumes), as separate machines would.
#
# Everything made here is recorded so down.sh can undo it: links, the nftables table rcop, the
# kernel settings changed (saved in $STATE/host/sysctl.saved), cgroups under rcop-$CHECKOUT_ID,
# mounts under $NODE_LIB and $NODE_RUN.

SANDBOX_IMAGE=registry.k8s.io/pause:3.10
CNI_BIN=/usr/lib/cni
RUNC=/usr/sbin/runc
# The cgroup v1 hierarchies a kubelet and runc use; the cgroups we make are below rcop-ID in each.
CGROUP_PARENT=rcop-$CHECKOUT_ID
# Kernel settings the bed needs or that the kubelet sets at start (protectKernelDefaults off):
# saved before the first change, put back by down.sh.
SYSCTLS=(net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables vm/overcommit_memory vm/panic_on_oom
	kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes)

# Host directories each node has its own of. /var/lib/redis-cluster is hostPath's default; a
# node's copy is world-writable, as a node prepared for non-root pods' hostPath data must be.
NODE_HOST_DIRS=(/var/lib/redis-cluster)

cgroup_hierarchies() {
	awk '$3 == "cgroup" && $2 ~ "^/sys/fs/cgroup/" { print $2 }' /proc/self/mounts
}

# save_host: the kernel settings and the nftables tables as they are before the first change.
save_host() {
	local saved=$STATE/host/sysctl.saved s
	[[ -f $saved ]] && return 0
	mkdir -p "$STATE/host"
	nft list tables >"$STATE/host/nft-tables.saved"
	for s in "${SYSCTLS[@]}"; do
		[[ -r /proc/sys/$s ]] && echo "$s $(cat "/proc/sys/$s")"
	done >"$saved.tmp"
	mv "$saved.tmp" "$saved"
}

# restore_nft: removes the tables the bed made (ours, kube-proxy's, and those iptables-nft made
# for the kubelet's KUBE-FIREWALL and canary chains); in a table that was there before, only the
# kubelet's chains.
restore_nft() {
	local saved=$STATE/host/nft-tables.saved t fam table
	[[ -f $saved ]] || return 0
	nft list tables | while read -r t fam table; do
		# Table ip rcop is the bed's own whatever the saved list says: one left by a bed
		# killed before its teardown must not be taken for the machine's.
		if [[ "$fam $table" == "ip rcop" ]] || ! grep -qx "table $fam $table" "$saved"; then
			nft delete table "$fam" "$table" || log "could not delete nftables table $fam $table"
		fi
	done
	for ipt in iptables ip6tables; do
		command -v $ipt >/dev/null || continue
		for table in filter nat mangle; do
			$ipt -t $table -D INPUT -j KUBE-FIREWALL 2>/dev/null || true
			$ipt -t $table -D OUTPUT -j KUBE-FIREWALL 2>/dev/null || true
			for c in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
				$ipt -t $table -F $c 2>/dev/null && $ipt -t $table -X $c 2>/dev/null || true
			done
		done
	done
	rm -f "$saved"
}

restore_sysctls() {
	local saved=$STATE/host/sysctl.saved s v
	[[ -f $saved ]] || return 0
	while read -r s v; do
		[[ $(cat "/proc/sys/$s" 2>/dev/null) == "$v" ]] || echo "$v" >"/proc/sys/$s" || log "could not restore $s to $v"
	done <"$saved"
	rm -f "$saved"
}

# net_up: the control plane's link with its address and the nodes', a route that keeps the
# whole range on this machine, forwarding, and the firewall table that keeps pods from
# reaching anything outside it.
net_up() {
	save_host
	echo 1 >/proc/sys/net/ipv4/ip_forward
	echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
	if ! ip link show rcop0 >/dev/null 2>&1; then
		# A veth pair whose far end is up too, so rcop0 has a carrier and its addresses answer.
		ip link add rcop0 type veth peer name rcop0p
		ip link set rcop0p up
		ip link set rcop0 up
		# What reaches the far end is never forwarded (a cluster IP no Service holds).
		echo 0 >/proc/sys/net/ipv4/conf/rcop0p/forwarding
		ip addr add "$API_IP/32" dev rcop0
		local n
		for ((n = 1; n <= NODES; n++)); do ip addr add "$(node_ip "$n")/32" dev rcop0; done
	fi
	# More specific routes (the bridges' /24s) win; anything else in the range goes nowhere.
	ip route replace unreachable "$NET_RANGE"
	# The cluster IPs: kube-proxy rewrites them on the way out; the route only lets a connect start.
	ip route replace "$SERVICE_CIDR" dev rcop0 src "$API_IP"
	# The load balancers' addresses (loadbalancer.sh), likewise rewritten by kube-proxy.
	ip route replace "$LB_RANGE" dev rcop0 src "$API_IP"
	nft -f - <<NFT
table ip rcop
delete table ip rcop
table ip rcop {
	chain forward {
		type filter hook forward priority filter; policy accept;
		ip saddr $NET_RANGE oifname != "rcop*" drop
		ip daddr $NET_RANGE iifname != "rcop*" drop
	}
	# Hairpin: a pod that reaches itself through a Service (kube-proxy's DNAT to its own
	# address) gets its SYN back with its own address as the source, and its kernel drops
	# it (a martian): the connection hangs. kube-proxy masquerades these only for the
	# endpoints it takes for local, those of the node it is named after (devnode-1); the
	# bed's one kube-proxy serves every node, so the other nodes' pods get the masquerade
	# here, from the pairs "address . the same address" of every pod range
	# (TestDevclusterHairpin). Whichever NAT chain masquerades first, the other leaves it.
	set hairpin {
		type ipv4_addr . ipv4_addr
		elements = { $(hairpin_pairs) }
	}
	chain hairpin {
		type nat hook postrouting priority srcnat; policy accept;
		ct status dnat ip saddr . ip daddr @hairpin masquerade fully-random
	}
}
NFT
}

# hairpin_pairs: "IP . IP" for every pod address of every node (.2 to .254 of its /24; .1 is
# the node's bridge), comma-separated, for net_up's hairpin set.
hairpin_pairs() {
	local n i net pairs=()
	for ((n = 1; n <= NODES; n++)); do
		net=$(node_pod_cidr "$n")
		net=${net%.0/24}
		for ((i = 2; i <= 254; i++)); do pairs+=("$net.$i . $net.$i"); done
	done
	local IFS=,
	echo "${pairs[*]}"
}

net_down() {
	ip link del rcop0 2>/dev/null || true
	local n
	for n in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^rcopn[0-9]*$' || true); do
		ip link del "$n" 2>/dev/null || true
	done
	ip route del unreachable "$NET_RANGE" 2>/dev/null || true
	restore_nft
	restore_sysctls
}

# make_cgroup PATH: PATH below every hierarchy; cpuset needs its cpus and mems filled in.
make_cgroup() {
	local h
	for h in $(cgroup_hierarchies); do
		mkdir -p "$h/$1"
		if [[ -f $h/cpuset.cpus ]]; then
			local d=$h p=
			for part in ${1//\// }; do
				p=$d
				d=$d/$part
				[[ -s $d/cpuset.cpus && $(cat "$d/cpuset.cpus") != "" ]] || cat "$p/cpuset.cpus" >"$d/cpuset.cpus"
				[[ $(cat "$d/cpuset.mems") != "" ]] || cat "$p/cpuset.mems" >"$d/cpuset.mems"
			done
		fi
	done
}

# node_up N: the node's bridge, CNI and containerd configuration, containerd and the kubelet.
node_up() {
	local n=$1 name ip lib run
	name=$(node_name "$n")
	ip=$(node_ip "$n")
	lib=$NODE_LIB/$name
	run=$NODE_RUN/$name
	mkdir -p "$lib/cni" "$lib/kubelet" "$lib/logs" "$run"
	make_node_certs "$name" "$ip"
	write_kubeconfig "$lib/kubeconfig" "system:node:$name" "$STATE/certs/$name.crt" "$STATE/certs/$name.key"
	make_cgroup "$CGROUP_PARENT/$name/runtime"
	make_cgroup "$CGROUP_PARENT/$name/pods"
	node_mount_namespace "$name"

	cat >"$lib/cni/10-rcop.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "rcop",
  "plugins": [{
    "type": "bridge",
    "bridge": "$(node_bridge "$n")",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": "$lib/ipam",
      "ranges": [[{"subnet": "$(node_pod_cidr "$n")"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
CNI

	# hack/devcluster/containerd.toml with everything under $run (the shims' sockets too, whose
	# paths must stay short), the CNI configuration above, and the pods' network namespaces under
	# the state directory rather than /run/netns.
	sed -e "s|@DIR@|$run|g" -e "s|conf_dir = .*|conf_dir = '$lib/cni'|" \
		-e "s|^\( *\)restrict_oom_score_adj = true|&\n\1netns_mounts_under_state_dir = true|" \
		"$ROOT/hack/devcluster/containerd.toml" >"$lib/containerd.toml"

	cat >"$lib/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 only.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_PARENT/$name/pods
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: $ip
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $STATE/certs/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $STATE/certs/$name-serving.crt
tlsPrivateKeyFile: $STATE/certs/$name-serving.key
containerRuntimeEndpoint: unix://$run/containerd.sock
podLogsDir: $lib/logs
failSwapOn: false
# The images are imported, never pulled: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusReportFrequency: 10s
serializeImagePulls: false
resolvConf: /etc/resolv.conf
maxPods: 110
YAML

	if ! pid_alive "$STATE/pids/containerd-$name.pid" "$lib/containerd.toml"; then
		log "starting containerd of $name"
		start_in_cgroup "containerd-$name" "$CGROUP_PARENT/$name/runtime" nsenter --mount="$run/mnt" -- "$BIN/containerd" --config "$lib/containerd.toml"
	fi
	wait_for 60 "containerd of $name" test -S "$run/containerd.sock"
	import_images "$name"
	if ! pid_alive "$STATE/pids/kubelet-$name.pid" "$lib/kubelet.yaml"; then
		log "starting the kubelet of $name ($ip)"
		start_in_cgroup "kubelet-$name" "$CGROUP_PARENT/$name/runtime" nsenter --mount="$run/mnt" -- "$BIN/kubelet" --config "$lib/kubelet.yaml" \
			--kubeconfig "$lib/kubeconfig" --root-dir "$lib/kubelet" --hostname-override "$name" --node-ip "$ip" --v 1
	fi
}

# node_mount_namespace NAME: the node's mount namespace, made once and kept by a bind mount of
# it at $NODE_RUN/NAME/mnt, with the node's own copy of each of NODE_HOST_DIRS.
node_mount_namespace() {
	local name=$1 mnt=$NODE_RUN/$1/mnt d
	awk -v m="$mnt" '$2 == m { found = 1 } END { exit !found }' /proc/self/mounts && return 0
	touch "$mnt"
	unshare --mount="$mnt" --propagation private true
	for d in "${NODE_HOST_DIRS[@]}"; do
		if [[ ! -d $d ]]; then
			mkdir -p "$d"
			echo "$d" >>"$STATE/host/created-dirs"
		fi
		mkdir -p "$NODE_LIB/$name/host$d"
		chmod 0777 "$NODE_LIB/$name/host$d"
		nsenter --mount="$mnt" -- mount --bind "$NODE_LIB/$name/host$d" "$d"
	done
}

# import_images NODE: every image under bin/images/ into the node's containerd, pinned so that
# nothing collects them (there is no registry to pull them back from).
import_images() {
	local run=$NODE_RUN/$1 f
	# ctr warns on every call that containerd's cgroup v1 support is deprecated.
	ctr() { "$BIN/ctr" "$@" 2> >(grep -v 'DEPRECATION: The support for cgroup v1' >&2); }
	shopt -s nullglob
	for f in "$BIN"/images/*.tar; do
		ctr --address "$run/containerd.sock" -n k8s.io images import "$f" >/dev/null
	done
	ctr --address "$run/containerd.sock" -n k8s.io images ls -q | while read -r ref; do
		ctr --address "$run/containerd.sock" -n k8s.io images label "$ref" io.cri-containerd.pinned=pinned >/dev/null
	done
}

# start_in_cgroup NAME CGROUP CMD...: start_proc, with the process (and so every shim and
# container it starts) in CGROUP, where down.sh finds whatever is left.
start_in_cgroup() {
	local name=$1 cg=$2
	shift 2
	# The shell joins the cgroup in every hierarchy, then execs the command, so the PID that
	# start_proc records is the command's.
	start_proc "$name" bash -c 'cg=$1; shift
		for h in $(awk '"'"'$3 == "cgroup" && $2 ~ "^/sys/fs/cgroup/" { print $2 }'"'"' /proc/self/mounts); do
			echo $$ >"$h/$cg/cgroup.procs"
		done
		exec "$@"' _ "$cg" "$@"
}

# wait_for SECONDS WHAT CMD...: until CMD succeeds.
wait_for() {
	local secs=$1 what=$2 i
	shift 2
	for ((i = 0; i < secs * 4; i++)); do
		"$@" && return 0
		sleep 0.25
	done
	log "$what not ready after ${secs}s"
	return 1
}

# nodes_down: the kubelets, every pod sandbox (so CNI releases addresses and network
# namespaces), containerd, then whatever process, mount and cgroup is left of them.
nodes_down() {
	local n name run
	stop_pid "$STATE/pids/kube-proxy.pid" "$BIN/kube-proxy"
	for ((n = 1; n <= 9; n++)); do
		name=$(node_name "$n")
		stop_pid "$STATE/pids/kubelet-$name.pid" kubelet.yaml
	done
	for ((n = 1; n <= 9; n++)); do
		name=$(node_name "$n")
		run=$NODE_RUN/$name
		if pid_alive "$STATE/pids/containerd-$name.pid" containerd.toml; then
			timeout 60 "$BIN/criclean" --address "$run/containerd.sock" 2>&1 | sed "s/^/$name: /" >&2 || true
		fi
		stop_pid "$STATE/pids/containerd-$name.pid" containerd.toml
	done
	kill_cgroup_procs
	unmount_under "$NODE_RUN" "$NODE_LIB" "$STATE"
	remove_cgroups
	rm -rf "$NODE_RUN" "$NODE_LIB"
	# The host directories made for the nodes' copies, when they are still empty.
	if [[ -f $STATE/host/created-dirs ]]; then
		sort -u "$STATE/host/created-dirs" | while read -r d; do rmdir "$d" 2>/dev/null || true; done
		rm -f "$STATE/host/created-dirs"
	fi
}

# kill_cgroup_procs: SIGKILL every process left in our cgroups (shims, containers), by PID.
kill_cgroup_procs() {
	local i pids h
	for ((i = 0; i < 50; i++)); do
		pids=$(for h in $(cgroup_hierarchies); do
			[[ -d $h/$CGROUP_PARENT ]] || continue # (an `&&` would fail the loop, and pipefail the script, when the last is gone)
			find "$h/$CGROUP_PARENT" -name cgroup.procs -exec cat {} + 2>/dev/null
		done | sort -u)
		[[ -z $pids ]] && return 0
		kill -KILL $pids 2>/dev/null || true
		sleep 0.1
	done
	log "processes left in cgroup $CGROUP_PARENT: $pids"
}

# unmount_under DIR...: every mount point below DIR, deepest first.
unmount_under() {
	local d m
	for d in "$@"; do
		[[ -n $d ]] || continue
		awk -v d="$d/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
			m=$(printf '%b' "$m")
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
		done
	done
}

remove_cgroups() {
	local h
	for h in $(cgroup_hierarchies) /sys/fs/cgroup/unified; do
		[[ -d $h/$CGROUP_PARENT ]] || continue
		find "$h/$CGROUP_PARENT" -depth -type d -exec rmdir {} + 2>/dev/null || true
		[[ -d $h/$CGROUP_PARENT ]] && log "could not remove cgroup $h/$CGROUP_PARENT"
	done
	return 0
}

# node_stop N [kill]: the node's kubelet and containerd stop, as when the node's agents die: the
# node goes NotReady and its containers keep running. With kill, its containers and their
# shims are killed too (SIGKILL, by PID from the node's cgroups), as when the machine loses power.
node_stop() {
	local name
	name=$(node_name "$1")
	stop_pid "$STATE/pids/kubelet-$name.pid" kubelet.yaml
	stop_pid "$STATE/pids/containerd-$name.pid" containerd.toml
	[[ ${2:-} == kill ]] || return 0
	local h pids
	pids=$(for h in $(cgroup_hierarchies); do
		[[ -d $h/$CGROUP_PARENT/$name ]] || continue
		find "$h/$CGROUP_PARENT/$name" -name cgroup.procs -exec cat {} + 2>/dev/null
	done | sort -u)
	[[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
}

# node_partition N on|off: node N's pods cut off from every other node's pods (their packets
# dropped where the host forwards them), or joined again. This machine still reaches them.
node_partition() {
	local bridge
	bridge=$(node_bridge "$1")
	nft list chain ip rcop partition >/dev/null 2>&1 || nft -f - <<NFT
table ip rcop {
	chain partition {
		type filter hook forward priority filter - 1; policy accept;
	}
}
NFT
	if [[ $2 == on ]]; then
		nft add rule ip rcop partition iifname "$bridge" oifname "rcopn*" oifname != "$bridge" drop
		nft add rule ip rcop partition oifname "$bridge" iifname "rcopn*" iifname != "$bridge" drop
	else
		nft flush chain ip rcop partition
		nft delete chain ip rcop partition # no trace once healed
	fi
}
