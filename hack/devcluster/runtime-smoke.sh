#!/usr/bin/env bash
# Proves the runtime and the images work on this machine, without Kubernetes: starts a throwaway
# containerd (hack/devcluster/containerd.toml, everything under one temp dir), imports the
# images, runs Redis as the pods do (uid 999, read-only root filesystem, no capabilities; host
# network, bound to 127.0.0.1:6399) and checks PING answers PONG, runs the exporter against it
# and the pause and operator images briefly, then stops everything it started by PID, unmounts,
# and removes its temp dir and cgroups.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BIN=$ROOT/bin
IMAGES=$BIN/images

hack/devcluster/install-node-packages.sh
hack/devcluster/build-runtime.sh
hack/devcluster/images.sh

step() { echo "--- $*"; }
fail() {
	echo "FAIL: $*" >&2
	[[ -f ${D:-/nonexistent}/containerd.log ]] && tail -20 "$D/containerd.log" >&2
	exit 1
}

D=$(mktemp -d /tmp/ctrsmoke.XXXXXX)
CG=devcluster-smoke-$$ # every container's cgroup is under /sys/fs/cgroup/*/$CG
CONTAINERD_PID=
export PATH=$BIN:$PATH # containerd finds containerd-shim-runc-v2 here
# ctr warns on every call that cgroup v1 is deprecated (containerd 2.2+); once is enough.
ctr() { "$BIN/ctr" --address "$D/containerd.sock" -n k8s.io "$@" 2> >(grep -v 'DEPRECATION: The support for cgroup v1' >&2); }

cleanup() {
	set +e
	if [[ -n $CONTAINERD_PID ]]; then
		for id in $(ctr tasks ls -q 2>/dev/null); do
			ctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1
			ctr tasks delete -f "$id" >/dev/null 2>&1
		done
		for id in $(ctr containers ls -q 2>/dev/null); do ctr containers delete "$id" >/dev/null 2>&1; done
		# Any shim still alive (its task could not be deleted) is ours: stop it by its PID file.
		for f in "$D"/state/io.containerd.runtime.v2.task/*/*/shim.pid; do
			[[ -f $f ]] && kill -KILL "$(cat "$f")" 2>/dev/null
		done
		kill -TERM "$CONTAINERD_PID" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$CONTAINERD_PID" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$CONTAINERD_PID" 2>/dev/null
		wait "$CONTAINERD_PID" 2>/dev/null
	fi
	# Unmount whatever is left under the temp dir, deepest first.
	findmnt -rn -o TARGET | grep "^$D/" | sort -r | while read -r m; do umount -l "$m"; done
	for c in /sys/fs/cgroup/*/"$CG"; do
		[[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	rm -rf "$D"
	leftover=$(ls -d /sys/fs/cgroup/*/"$CG" 2>/dev/null)
	[[ -z $leftover && ! -e $D ]] || echo "cleanup left: $leftover $D" >&2
	[[ ! -e /run/containerd/fifo ]] || echo "cleanup left: /run/containerd/fifo" >&2
}
trap cleanup EXIT

step "starting containerd $("$BIN/containerd" --version | cut -d' ' -f3) in $D"
sed "s|@DIR@|$D|g" hack/devcluster/containerd.toml >"$D/config.toml"
"$BIN/containerd" --config "$D/config.toml" >"$D/containerd.log" 2>&1 &
CONTAINERD_PID=$!
for _ in $(seq 100); do
	ctr version >/dev/null 2>&1 && break
	kill -0 "$CONTAINERD_PID" 2>/dev/null || fail "containerd exited"
	sleep 0.2
done
ctr version >/dev/null || fail "containerd does not answer on $D/containerd.sock"
echo "containerd is up (PID $CONTAINERD_PID)"

step "importing images"
for tar in "$IMAGES"/*.tar; do
	ctr images import "$tar" >/dev/null || fail "import $tar"
done
ctr images ls | awk 'NR == 1 || /^(docker.io|registry.k8s.io)/ {print $1, $2, $3, $4}' | column -t
for name in docker.io/library/redis:7.0 docker.io/library/redis:7.0-b registry.k8s.io/pause:3.10 \
	docker.io/oliver006/redis_exporter:v1.88.0 docker.io/library/redis-cluster-operator:dev; do
	ctr images check "name==$name" | grep -q complete || fail "image $name is not complete after import"
done
a=$(ctr images ls "name==docker.io/library/redis:7.0" | awk 'NR == 2 {print $3}')
b=$(ctr images ls "name==docker.io/library/redis:7.0-b" | awk 'NR == 2 {print $3}')
[[ -n $a && $a != "$b" ]] || fail "redis:7.0 and redis:7.0-b have the same digest"
echo "redis:7.0 $a and redis:7.0-b $b differ"

# As the pods run Redis: uid/gid 999, read-only root, no capabilities, /data a writable volume.
# --fifo-dir: ctr would otherwise create its IO fifos in /run/containerd/fifo.
RUNC=(--runc-binary /usr/sbin/runc --runc-root "$D/runc" --fifo-dir "$D/fifo")
NOCAPS=()
for c in CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID SETFCAP SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE; do
	NOCAPS+=(--cap-drop "CAP_$c")
done
mkdir -p "$D/data" && chown 999:999 "$D/data"

step "running docker.io/library/redis:7.0 as 999:999, read-only root, no capabilities"
ctr run -d --net-host --read-only --user 999:999 "${NOCAPS[@]}" "${RUNC[@]}" --cgroup "/$CG/redis" \
	--mount "type=bind,src=$D/data,dst=/data,options=rbind:rw" \
	--log-uri "file://$D/redis.log" \
	docker.io/library/redis:7.0 redis redis-server --port 6399 --bind 127.0.0.1 --save '' >/dev/null
for _ in $(seq 50); do
	[[ $(redis-cli -p 6399 ping 2>/dev/null) == PONG ]] && break
	sleep 0.2
done
pid=$(ctr tasks ls | awk '$1 == "redis" {print $2}')
echo "task: $(ctr tasks ls | awk '$1 == "redis"')"
echo "process: $(ps -o uid=,gid=,comm= -p "$pid")  $(grep CapEff "/proc/$pid/status")"
echo "cgroup: $(grep memory "/proc/$pid/cgroup")"
[[ $(ps -o uid= -p "$pid" | tr -d ' ') == 999 ]] || fail "redis does not run as uid 999"
echo "host redis-cli -p 6399 ping: $(redis-cli -p 6399 ping)"
got=$(ctr tasks exec --fifo-dir "$D/fifo" --exec-id ping redis redis-cli -p 6399 ping)
echo "image redis-cli -p 6399 ping: $got"
[[ $got == PONG ]] || fail "PING answered '$got'"
echo "image redis-server --version: $(ctr tasks exec --fifo-dir "$D/fifo" --exec-id version redis redis-server --version)"
echo "SAVE into the /data volume: $(redis-cli -p 6399 save) ($(ls "$D/data"))"
# CONFIG SET dir is refused on 7.0 (a protected config), so read the mount flags instead.
rootflags=$(awk '$5 == "/" {print $6}' "/proc/$pid/mountinfo")
echo "root filesystem mount options: $rootflags"
[[ $rootflags == ro,* ]] || fail "the root filesystem is not read-only"

step "running docker.io/oliver006/redis_exporter:v1.88.0 against it"
ctr run -d --net-host --read-only "${NOCAPS[@]}" "${RUNC[@]}" --cgroup "/$CG/exporter" \
	--log-uri "file://$D/exporter.log" \
	docker.io/oliver006/redis_exporter:v1.88.0 exporter /redis_exporter \
	--redis.addr=redis://127.0.0.1:6399 --web.listen-address=127.0.0.1:9199 >/dev/null
metrics=
for _ in $(seq 50); do
	metrics=$(curl -sf http://127.0.0.1:9199/metrics || true)
	grep -q '^redis_up 1' <<<"$metrics" && break
	sleep 0.2
done
grep -E '^(redis_up|redis_exporter_build_info|redis_version)' <<<"$metrics" | sed 's/^/  /' || true
grep -q '^redis_up 1' <<<"$metrics" || fail "the exporter does not report redis_up 1"
echo "exporter runs as uid $(ps -o uid= -p "$(ctr tasks ls | awk '$1 == "exporter" {print $2}')" | tr -d ' ')"

step "running registry.k8s.io/pause:3.10: SIGTERM ends it with status 0"
ctr run -d --read-only "${NOCAPS[@]}" "${RUNC[@]}" --cgroup "/$CG/pause" registry.k8s.io/pause:3.10 pause >/dev/null
sleep 0.5
ctr tasks ls | awk '$1 == "pause"'
ctr tasks kill -s SIGTERM pause
for _ in $(seq 25); do ctr tasks ls | awk '$1 == "pause"' | grep -q STOPPED && break; sleep 0.2; done
# ctr tasks delete exits with the task's exit status.
status=0
ctr tasks delete pause || status=$?
echo "pause exit status: $status"
[[ $status == 0 ]] || fail "pause exited with $status"

step "running docker.io/library/redis-cluster-operator:dev --help"
out=$(ctr run --rm --read-only "${NOCAPS[@]}" "${RUNC[@]}" --cgroup "/$CG/operator" \
	docker.io/library/redis-cluster-operator:dev operator /manager --help 2>&1 || true)
grep -m3 -E 'Usage|-metrics|-leader' <<<"$out" | sed 's/^/  /'
grep -q 'Usage' <<<"$out" || fail "the operator image did not run: $out"

step "stopping the containers"
for id in exporter redis; do
	ctr tasks kill -s SIGTERM "$id"
	for _ in $(seq 25); do ctr tasks ls | awk -v id="$id" '$1 == id' | grep -q STOPPED && break; sleep 0.2; done
	ctr tasks delete "$id" >/dev/null
	ctr containers delete "$id"
done
ctr containers delete pause
echo "PASS: runtime smoke test"
