#!/usr/bin/env bash
# The devcluster's load balancer, a MetalLB-lite: every Service of type LoadBalancer gets an
# address of LB_RANGE (198.18.1.0/24) in its status, the lowest free one, which kube-proxy then
# serves (it rewrites a load balancer's address to the Service's endpoints, as for a cluster IP)
# and the host reaches through the route nodes.sh gives LB_RANGE. An address is freed when its
# Service is deleted or changes type. Started by up.sh, stopped by down.sh by its PID.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# assign gives every LoadBalancer Service without an address the lowest free one.
assign() {
	local services ns name ip used=" " n
	services=$(kubectl_dc get services -A -o jsonpath='{range .items[?(@.spec.type=="LoadBalancer")]}{.metadata.namespace}{" "}{.metadata.name}{" "}{.status.loadBalancer.ingress[0].ip}{"\n"}{end}') || return 0
	while read -r ns name ip; do
		[[ -n $ip ]] && used+="$ip "
	done <<<"$services"
	n=$LB_FIRST
	while read -r ns name ip; do
		[[ -z $name || -n $ip ]] && continue
		while [[ $used == *" $(lb_ip "$n") "* ]]; do n=$((n + 1)); done
		if ((n > LB_LAST)); then
			log "load balancer: no free address in $LB_RANGE for $ns/$name"
			return 0
		fi
		ip=$(lb_ip "$n")
		if kubectl_dc -n "$ns" patch service "$name" --subresource=status --type=merge \
			-p "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"$ip\",\"ipMode\":\"VIP\"}]}}}" >/dev/null; then
			log "load balancer: $ns/$name at $ip"
			used+="$ip "
		fi
	done <<<"$services"
}

watcher=
trap '[[ -n $watcher ]] && kill "$watcher" 2>/dev/null; exit 0' TERM INT
while :; do
	# Every change to a Service (the first list included) is a line: assign again.
	exec 3< <(kubectl_dc get services -A --watch -o name 2>/dev/null)
	watcher=$!
	while read -r -u 3 _; do assign; done
	exec 3<&-
	# The watch ended (the API server restarted, or its timeout): start another.
	sleep 1
done
