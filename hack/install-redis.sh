#!/usr/bin/env bash
# Installs Debian's redis-server and redis-cli when missing: redis-cli for the host (the demo, the
# benches), and the packages the Redis image is made from (images.sh). The packaged service must
# not be left running: policy-rc.d
# forbids the maintainer scripts from starting it (there is no systemd on these machines anyway).
set -euo pipefail

if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
	echo "redis-server is installed: $(redis-server --version | cut -d' ' -f3)"
	exit 0
fi

SUDO=
if [[ $(id -u) != 0 ]]; then
	SUDO=sudo
fi

policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
	# Exit code 101 tells invoke-rc.d "action forbidden": the package installs without starting.
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
	$SUDO chmod +x "$policy"
	created_policy=1
fi
cleanup() {
	if [[ $created_policy == 1 ]]; then
		$SUDO rm -f "$policy"
	fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends redis-server redis-tools

# Should a service have started anyway (a system with an init that ignores policy-rc.d), stop it
# by the PID it recorded, never by name.
for pidfile in /run/redis/redis-server.pid /var/run/redis/redis-server.pid; do
	if [[ -f $pidfile ]]; then
		$SUDO kill "$(cat "$pidfile")" 2>/dev/null || true
	fi
done
echo "Installed redis-server: $(redis-server --version | cut -d' ' -f3)"
