#!/usr/bin/env bash
# Installs the Debian packages a devcluster node needs next to the containerd built by
# build-runtime.sh, when missing:
#   runc                         the OCI runtime the runc v2 shim execs (bookworm: 1.1.5)
#   containernetworking-plugins  CNI plugins bridge, host-local, loopback, portmap in /usr/lib/cni (1.1.1)
#   iptables                     used by the bridge (ipMasq) and portmap plugins, and the kubelet
#   conntrack                    portmap and kube-proxy flush stale UDP/NAT entries with it
#   nftables                     nft: kube-proxy's nftables mode and the bed's own firewall table
# The host's apt configuration is left as it is; none of these packages starts a service.
set -euo pipefail

have() {
	command -v runc >/dev/null && [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local &&
		-x /usr/lib/cni/loopback && -x /usr/lib/cni/portmap ]] &&
		command -v iptables >/dev/null && command -v conntrack >/dev/null && command -v nft >/dev/null
}

if have; then
	echo "node packages are installed: runc $(runc --version | head -1 | cut -d' ' -f3), CNI plugins in /usr/lib/cni"
	exit 0
fi

SUDO=
if [[ $(id -u) != 0 ]]; then
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends runc containernetworking-plugins iptables conntrack nftables
have || { echo "node packages are still missing after apt-get install" >&2; exit 1; }
echo "Installed node packages: runc $(runc --version | head -1 | cut -d' ' -f3), CNI plugins in /usr/lib/cni"
