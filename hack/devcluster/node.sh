#!/usr/bin/env bash
# One node's faults, for the fault suite and by hand:
#   node.sh stop N        stop devnode-N's kubelet and containerd (NotReady; its containers run on)
#   node.sh kill N        the same, and kill its containers, as a machine that loses power
#   node.sh start N       start them again (its containers come back as the kubelet restarts them)
#   node.sh partition N   drop every packet between devnode-N's pods and other nodes' pods
#   node.sh heal N        undo partition
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/certs.sh"
source "$(dirname "$0")/nodes.sh"

n=${2:?usage: node.sh stop|kill|start|partition|heal N}
case $1 in
stop) node_stop "$n" ;;
kill) node_stop "$n" kill ;;
start) node_up "$n" ;;
partition) node_partition "$n" on ;;
heal) node_partition "$n" off ;;
*)
	echo "usage: node.sh stop|kill|start|partition|heal N" >&2
	exit 2
	;;
esac
