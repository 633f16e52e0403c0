#!/usr/bin/env bash
# The host as the devcluster may change it, written to a file, so a run can prove it left the
# machine as it found it:
#   hostcheck.sh snapshot FILE   before up.sh
#   hostcheck.sh compare FILE    after down.sh: prints what differs and fails when anything does
# It looks at mounts, links and addresses, routes, network namespaces, the nftables ruleset
# (iptables' nft backend included), cgroups (the top level, and the bed's anywhere), the kernel settings the nodes
# change, and processes running a binary of bin/ or the runtime's.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nodes.sh"

state() {
	echo "## mounts"
	awk '{ print $1, $2, $3 }' /proc/self/mounts | sort
	echo "## links"
	ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | sort
	echo "## addresses"
	ip -o addr show | awk '{ print $2, $3, $4 }' | sort
	echo "## routes"
	{ ip route show table all; ip -6 route show table all; } 2>/dev/null | grep -v -E '^(local|broadcast|multicast) .* table local' | sort
	echo "## netns"
	ls /run/netns 2>/dev/null | sort || true
	echo "## nftables"
	nft list ruleset 2>/dev/null || true
	echo "## cgroups"
	# The top level of each hierarchy, and any cgroup of a devcluster's at any depth (deeper
	# cgroups come and go with the machine's own processes).
	for h in $(cgroup_hierarchies) /sys/fs/cgroup/unified; do
		[[ -d $h ]] && { find "$h" -mindepth 1 -maxdepth 1 -type d; find "$h" -mindepth 2 -type d -name 'rcop-*'; }
	done | sort
	echo "## sysctls"
	# The ones the bed sets and puts back, and others a kubelet or kube-proxy may set.
	for s in "${SYSCTLS[@]}" net/ipv4/conf/all/route_localnet net/ipv4/conf/all/forwarding \
		net/netfilter/nf_conntrack_max net/netfilter/nf_conntrack_tcp_timeout_established \
		net/netfilter/nf_conntrack_tcp_timeout_close_wait net/bridge/bridge-nf-call-ip6tables; do
		[[ -r /proc/sys/$s ]] && echo "$s $(cat "/proc/sys/$s")"
	done
	echo "## directories"
	for d in "${NODE_HOST_DIRS[@]}" "$NODE_LIB" "$NODE_RUN"; do [[ -e $d ]] && echo "$d"; done
	echo "## processes"
	for exe in /proc/[0-9]*/exe; do
		target=$(readlink "$exe" 2>/dev/null) || continue
		case $target in
		"$BIN"/* | "$RUNC" | "$CNI_BIN"/*) echo "${exe//[!0-9]/} $target" ;;
		esac
	done | sort
}

case ${1:-} in
snapshot) state >"$2" ;;
compare)
	if ! diff -u "$2" <(state); then
		echo "hostcheck: the host differs from $2 (lines with - were there before, + are new)" >&2
		exit 1
	fi
	echo "hostcheck: the host is as it was"
	;;
*)
	echo "usage: $0 snapshot|compare FILE" >&2
	exit 2
	;;
esac
