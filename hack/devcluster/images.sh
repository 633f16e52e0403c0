#!/usr/bin/env bash
# Builds the devcluster's container images as OCI archives in bin/images/, with no Docker engine
# and no registry: each is a root filesystem put together here and packed by
# hack/devcluster/images/imagebuild; `ctr -n k8s.io images import bin/images/X.tar` registers it
# under its full name.
#
#   redis.tar           docker.io/library/redis:7.0            Debian bookworm's redis-server/redis-tools, with dash as /bin/sh and a few coreutils
#   redis-b.tar         docker.io/library/redis:7.0-b          the same, another label and marker file
#   redis-exporter.tar  docker.io/oliver006/redis_exporter:V   built from its Go module
#   pause.tar           registry.k8s.io/pause:3.10             hack/devcluster/images/pause
#   operator.tar        docker.io/library/redis-cluster-operator:dev   this repository, as the Dockerfile builds it
#
# Each image is rebuilt only when its inputs change (bin/images/.NAME.stamp): this script, the
# image builder, and for Redis the Debian package versions and the host libraries copied in, for
# the exporter and pause their module pins and source, for the operator its Go sources, embedded
# files, go.mod and go.sum. `./images.sh NAME...` builds only those.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SELF=$ROOT/hack/devcluster/images.sh
OUT=$ROOT/bin/images
MOD=$ROOT/hack/devcluster/images

REDIS_UPSTREAM=7.0.15 # the Redis release of bookworm's redis-server and redis-tools
REDIS_TAG=7.0
REDIS_UID=999
EXPORTER_VERSION=v1.88.0 # must match the tool pin in hack/devcluster/images/go.mod
EXPORTER_COMMIT=16db88a0c2981c365aeca0973c43dd7d6a560f64
EXPORTER_UID=59000 # as upstream's image
PAUSE_TAG=3.10
PAUSE_UID=65535 # as upstream's image
OPERATOR_IMAGE=docker.io/library/redis-cluster-operator:dev
NONROOT_UID=65532 # distroless's nonroot, as the Dockerfile

ALL=(redis redis-b redis-exporter pause operator)
WANT=("$@")
[[ ${#WANT[@]} -gt 0 ]] || WANT=("${ALL[@]}")

mkdir -p "$OUT"
WORK=$(mktemp -d)
chmod 755 "$WORK" # apt-get download writes as _apt
trap 'rm -rf "$WORK"' EXIT

hash_files() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }

# What every image depends on: this script, the image builder and the Go toolchain.
common_pin() {
	(cat "$SELF" "$MOD/go.mod" "$MOD/go.sum" "$MOD/imagebuild/main.go" && go env GOVERSION) | sha256sum | cut -d' ' -f1
}

candidate() { apt-cache policy "$1" | awk '/Candidate:/ {print $2}'; }

# A shell and the few tools `kubectl exec` users and the tests reach for, as in the official
# Redis image (Debian-based, where they come with the base system): Debian's dash as /bin/sh and
# coreutils, copied from the host, which is the same suite.
REDIS_TOOLS=(/usr/bin/dash /usr/bin/id /usr/bin/cat /usr/bin/ls /usr/bin/touch /usr/bin/rm /usr/bin/mkdir /usr/bin/sleep /usr/bin/env /usr/bin/head /usr/bin/tail)

# The host libraries the host's Redis binaries and REDIS_TOOLS load (hack/install-redis.sh
# installs the same packages, so this is the library set the image will get).
redis_libs() {
	ldd /usr/bin/redis-server /usr/bin/redis-cli "${REDIS_TOOLS[@]}" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}' | sort -u
}

redis_pin() {
	"$ROOT/hack/install-redis.sh" >/dev/null
	[[ $(candidate redis-tools) != "(none)" ]] || apt-get update -qq
	local libs
	mapfile -t libs < <(redis_libs)
	echo "$(common_pin) $(candidate redis-server) $(candidate redis-tools) $(hash_files "${libs[@]}" "${REDIS_TOOLS[@]}")"
}

exporter_pin() { echo "$(common_pin) $EXPORTER_VERSION $EXPORTER_COMMIT"; }
pause_pin() { echo "$(common_pin) $(cat "$MOD/pause/main.go" | sha256sum)"; }

# The operator's own packages (Go files and embedded files) plus go.mod and go.sum, which pin the rest.
operator_pin() {
	local files
	mapfile -t files < <(go list -deps -f '{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}' . | sort)
	echo "$(common_pin) $(hash_files go.mod go.sum "${files[@]}")"
}

IMAGEBUILD=
imagebuild() {
	if [[ -z $IMAGEBUILD ]]; then
		IMAGEBUILD=$WORK/imagebuild
		(cd "$MOD" && go build -o "$IMAGEBUILD" ./imagebuild)
	fi
	"$IMAGEBUILD" "$@"
}

# base_rootfs DIR UID NAME: the directories and account files every image has.
base_rootfs() {
	local dir=$1 uid=$2 name=$3
	mkdir -p "$dir/etc" "$dir/tmp"
	chmod 1777 "$dir/tmp"
	printf 'root:x:0:0:root:/root:/sbin/nologin\n%s:x:%s:%s:%s:/nonexistent:/sbin/nologin\n' "$name" "$uid" "$uid" "$name" >"$dir/etc/passwd"
	printf 'root:x:0:\n%s:x:%s:\n' "$name" "$uid" >"$dir/etc/group"
	chmod 644 "$dir/etc/passwd" "$dir/etc/group"
}

# Redis: the binaries of bookworm's redis-server and redis-tools, exactly the shared libraries
# they load (resolved by ldd against the host, which is the same suite) and the dynamic loader.
# Builds both redis.tar and redis-b.tar, which differ only by a label and a marker file.
build_redis() {
	local dl=$WORK/redis-debs ex=$WORK/redis-extract rootfs=$WORK/redis-rootfs
	mkdir -p "$dl" "$ex"
	# apt-get download drops root to _apt, which must be able to write the directory.
	if id _apt >/dev/null 2>&1; then chown _apt "$dl"; fi
	(cd "$dl" && apt-get download -qq redis-server redis-tools)
	for deb in "$dl"/*.deb; do
		local v
		v=$(dpkg-deb -f "$deb" Version)
		[[ $v == *:"$REDIS_UPSTREAM"-* ]] || { echo "$(basename "$deb"): version $v, want Redis $REDIS_UPSTREAM" >&2; exit 1; }
		dpkg-deb -x "$deb" "$ex"
	done
	local debver
	debver=$(dpkg-deb -f "$dl"/redis-tools_*.deb Version)

	base_rootfs "$rootfs" "$REDIS_UID" redis
	mkdir -p "$rootfs/usr/bin" "$rootfs/usr/lib/x86_64-linux-gnu" "$rootfs/usr/lib64" "$rootfs/data" "$rootfs/etc/redis"
	# bookworm is merged-/usr: the loader's path /lib64/ld-linux-x86-64.so.2 goes through these links.
	ln -s usr/bin "$rootfs/bin"
	ln -s usr/sbin "$rootfs/sbin"
	ln -s usr/lib "$rootfs/lib"
	ln -s usr/lib64 "$rootfs/lib64"
	cp -a "$ex"/usr/bin/redis-* "$rootfs/usr/bin/"
	cp "${REDIS_TOOLS[@]}" "$rootfs/usr/bin/"
	ln -s dash "$rootfs/usr/bin/sh"
	mkdir -p "$rootfs/usr/sbin" "$rootfs/usr/share/doc/redis-tools"
	cp "$ex"/usr/share/doc/redis-tools/copyright "$rootfs/usr/share/doc/redis-tools/"

	local libs=() elf
	for elf in "$rootfs"/usr/bin/*; do
		[[ -L $elf ]] && continue
		if ldd "$elf" | grep -q 'not found'; then
			ldd "$elf" >&2
			echo "$elf: a library is missing on the host (hack/install-redis.sh installs them)" >&2
			exit 1
		fi
		mapfile -t -O "${#libs[@]}" libs < <(ldd "$elf" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}')
	done
	local lib
	for lib in $(printf '%s\n' "${libs[@]}" | sort -u); do
		# Copy the file the soname points to, under the soname, in /usr/lib/x86_64-linux-gnu.
		cp -L "$lib" "$rootfs/usr/lib/x86_64-linux-gnu/$(basename "$lib")"
	done
	ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$rootfs/usr/lib64/ld-linux-x86-64.so.2"
	printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
	# Check the result inside itself: the loader finds every library without the host's.
	if [[ $(id -u) == 0 ]]; then
		chroot "$rootfs" /usr/bin/redis-server --version >/dev/null
		chroot "$rootfs" /usr/bin/redis-cli --version >/dev/null
		[[ $(chroot "$rootfs" /bin/sh -c 'id -un') == root ]]
	fi

	local variant name file
	for variant in a b; do
		name=docker.io/library/redis:$REDIS_TAG file=redis
		[[ $variant == a ]] || name=$name-$variant file=redis-$variant
		echo "$variant" >"$rootfs/etc/devcluster-image-variant"
		imagebuild -rootfs "$rootfs" -name "$name" -o "$OUT/$file.tar.new" \
			-cmd '["redis-server"]' -user "$REDIS_UID:$REDIS_UID" -workdir /data \
			-chown "/data=$REDIS_UID:$REDIS_UID" \
			-label "org.opencontainers.image.version=$debver" \
			-label "io.hc-middleware.devcluster.variant=$variant"
	done
	mv "$OUT/redis.tar.new" "$OUT/redis.tar"
	mv "$OUT/redis-b.tar.new" "$OUT/redis-b.tar"
}

build_exporter() {
	local rootfs=$WORK/exporter-rootfs
	base_rootfs "$rootfs" "$EXPORTER_UID" exporter
	(cd "$MOD" && CGO_ENABLED=0 go build -trimpath -o "$rootfs/redis_exporter" \
		-ldflags "-s -w -X main.BuildVersion=$EXPORTER_VERSION -X main.BuildCommitSha=$EXPORTER_COMMIT -X main.BuildDate=n/a" \
		github.com/oliver006/redis_exporter)
	imagebuild -rootfs "$rootfs" -name "docker.io/oliver006/redis_exporter:$EXPORTER_VERSION" -o "$OUT/redis-exporter.tar" \
		-entrypoint '["/redis_exporter"]' -user "$EXPORTER_UID:$EXPORTER_UID" \
		-label "org.opencontainers.image.version=$EXPORTER_VERSION"
}

build_pause() {
	local rootfs=$WORK/pause-rootfs
	base_rootfs "$rootfs" "$PAUSE_UID" pause
	(cd "$MOD" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$rootfs/pause" ./pause)
	imagebuild -rootfs "$rootfs" -name "registry.k8s.io/pause:$PAUSE_TAG" -o "$OUT/pause.tar" \
		-entrypoint '["/pause"]' -user "$PAUSE_UID:$PAUSE_UID"
}

# As the Dockerfile: a static manager, /manager as the entrypoint, USER 65532:65532.
build_operator() {
	local rootfs=$WORK/operator-rootfs
	base_rootfs "$rootfs" "$NONROOT_UID" nonroot
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$rootfs/manager" .
	imagebuild -rootfs "$rootfs" -name "$OPERATOR_IMAGE" -o "$OUT/operator.tar" \
		-entrypoint '["/manager"]' -user "$NONROOT_UID:$NONROOT_UID"
}

for img in "${WANT[@]}"; do
	case $img in
	redis | redis-b) key=redis pin=redis_pin build=build_redis files=(redis redis-b) ;;
	redis-exporter) key=redis-exporter pin=exporter_pin build=build_exporter files=(redis-exporter) ;;
	pause) key=pause pin=pause_pin build=build_pause files=(pause) ;;
	operator) key=operator pin=operator_pin build=build_operator files=(operator) ;;
	*) echo "unknown image $img; known: ${ALL[*]}" >&2; exit 1 ;;
	esac
	stamp=$OUT/.$key.stamp
	want=$($pin | sha256sum | cut -d' ' -f1)
	current=1
	for f in "${files[@]}"; do [[ -f $OUT/$f.tar ]] || current=0; done
	if [[ $current == 1 && -f $stamp && $(cat "$stamp") == "$want" ]]; then
		echo "image $key is current"
		continue
	fi
	start=$(date +%s)
	rm -f "$stamp"
	$build
	echo "$want" >"$stamp"
	for f in "${files[@]}"; do
		echo "built bin/images/$f.tar ($(du -h "$OUT/$f.tar" | cut -f1)) in $(($(date +%s) - start))s"
	done
done
