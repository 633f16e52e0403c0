#!/usr/bin/env bash
# Builds the devcluster's container images as OCI archives in bin/images/, with no Docker engine
# and no registry: each is a root filesystem put together here and packed by
# hack/devcluster/images/imagebuild; `ctr -n k8s.io images import bin/images/X.tar` registers it
# under its full name.
#
#   redis.tar           docker.io/library/redis:7.0            Debian bookworm's redis-server/redis-tools, with dash as /bin/sh and a few coreutils
#   redis-b.tar         docker.io/library/redis:7.0-b          the same, another label and marker file
#   redis-8.0.tar       docker.io/library/redis:8.0            trixie's redis-server/redis-tools with trixie's libraries, dash and coreutils
#   valkey-8.1.tar      docker.io/valkey/valkey:8.1            trixie's valkey-server/valkey-tools, likewise
#   valkey-9.1.tar      docker.io/valkey/valkey:9.1            forky's valkey-server/valkey-tools, likewise
#   redis-exporter.tar  docker.io/oliver006/redis_exporter:V   built from its Go module
#   pause.tar           registry.k8s.io/pause:3.10             hack/devcluster/images/pause
#   operator.tar        docker.io/library/redis-cluster-operator:dev   this repository, as the Dockerfile builds it
#
# Each image is rebuilt only when its inputs change (bin/images/.NAME.stamp): this script, the
# image builder, and for Redis the Debian package versions and the host libraries copied in, for
# for the newer servers the pinned package versions below, for the exporter and pause their
# module pins and source, for the operator its Go sources, embedded
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

# The newer servers come from newer Debian suites than the host's (bookworm), whose glibc and
# OpenSSL are too old for them, so each image gets its suite's libraries too, resolved and
# downloaded with apt-get on a private configuration under bin/apt/SUITE (the host's apt
# configuration and package state are never touched; the mirror is the one the host's sources
# name). Each server is pinned to an exact package version: a suite that moves on (the mirror
# keeps only its newest) fails the build, naming the version it has, until the pin is updated.
# The libraries follow the suite; /usr/share/doc/devcluster-packages in the image lists them.
#   image       suite  packages                        version
SERVERS=(
	"redis-8.0  trixie redis-server:redis-tools   5:8.0.2-3+deb13u3"
	"valkey-8.1 trixie valkey-server:valkey-tools 8.1.1+dfsg1-3+deb13u3"
	"valkey-9.1 forky  valkey-server:valkey-tools 9.1.2-1"
)
APT_DIR=$ROOT/bin/apt

ALL=(redis redis-b redis-8.0 valkey-8.1 valkey-9.1 redis-exporter pause operator)
WANT=("$@")
[[ ${#WANT[@]} -gt 0 ]] || WANT=("${ALL[@]}")

mkdir -p "$OUT"
# One build at a time: `go test ./...` runs packages in parallel, and two of them may each find
# the same archive missing (they share $OUT/NAME.tar.new and bin/apt). The second waits, then
# finds the stamp current and builds nothing. Children that outlive the script must not
# inherit fd 9 (9>&-), or the lock would outlive it too.
exec 9>"$OUT/.lock"
flock -w 900 9 || { echo "images.sh: another build has held $OUT/.lock for 15 minutes" >&2; exit 1; }
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

# server_line IMAGE: the SERVERS entry of IMAGE as "suite packages version".
server_line() {
	local l
	for l in "${SERVERS[@]}"; do
		read -r -a f <<<"$l"
		if [[ ${f[0]} == "$1" ]]; then
			echo "${f[1]} ${f[2]} ${f[3]}"
			return
		fi
	done
	return 1
}

server_pin() {
	echo "$(common_pin) $(server_line "$1")"
}

# suite_apt SUITE ARGS...: apt-get (or apt-cache with APT=apt-cache) on SUITE alone, with a
# private source list, state and cache under bin/apt/SUITE. The mirror is the host's: the URI of
# its Debian source for its own suite.
suite_apt() {
	local suite=$1 d=$APT_DIR/$1
	shift
	if [[ ! -f $d/etc/sources.list ]]; then
		local uri
		uri=$(apt_mirror)
		mkdir -p "$d/etc" "$d/state/lists/partial" "$d/cache/archives/partial"
		: >"$d/state/status" # nothing installed: the whole dependency closure is resolved
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite main" >"$d/etc/sources.list"
	fi
	"${APT:-apt-get}" -o Dir::Etc::SourceList="$d/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null \
		-o Dir::State="$d/state" -o Dir::State::status="$d/state/status" -o Dir::Cache="$d/cache" \
		-o APT::Sandbox::User=root -o APT::Architecture=amd64 -o APT::Architectures::=amd64 \
		-o Debug::NoLocking=1 "$@"
}

# apt_mirror: the Debian archive URI the host's sources use for its own suite.
apt_mirror() {
	local codename uri
	codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
	uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v s="$codename" '
		/^URIs:/ {u = $2} /^Suites:/ {for (i = 2; i <= NF; i++) if ($i == s) {print u; exit}}')
	[[ -n $uri ]] || uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk -v s="$codename" '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i == s && $(i-1) ~ /^[a-z]+:\/\//) {print $(i-1); exit}}')
	[[ -n $uri ]] || { echo "no Debian source for $codename in /etc/apt/sources.list*" >&2; exit 1; }
	echo "$uri"
}

# suite_fetch SUITE PKG=VERSION...: the packages' .deb files (without their dependencies) in
# bin/apt/SUITE/cache/archives, downloaded once; prints their paths.
suite_fetch() {
	local suite=$1 arch=$APT_DIR/$1/cache/archives p name ver f
	shift
	for p in "$@"; do
		name=${p%%=*} ver=${p#*=}
		f=$(ls "$arch/${name}_${ver//:/%3a}_"*.deb 2>/dev/null | head -1 || true)
		if [[ -z $f ]]; then
			(cd "$arch" && suite_apt "$suite" download -qq "$p")
			f=$(ls "$arch/${name}_${ver//:/%3a}_"*.deb | head -1)
		fi
		echo "$f"
	done
}

# suite_version SUITE PKG: the suite's version of PKG (after an update when the lists are missing).
suite_version() {
	APT=apt-cache suite_apt "$1" policy "$2" | awk '/Candidate:/ {print $2}'
}

# build_server IMAGE: a self-contained image of a server from a newer Debian suite (SERVERS):
# the server's and its cli's binaries, the suite's dash and a few coreutils, and exactly the
# shared libraries they load, from the suite's packages, with the suite's loader.
build_server() {
	local image=$1 suite pkgs ver engine tag
	read -r suite pkgs ver <<<"$(server_line "$image")"
	engine=${image%%-*} tag=${image#*-}
	local server=${pkgs%%:*} tools=${pkgs#*:}
	local dl=$WORK/$image-debs ex=$WORK/$image-extract rootfs=$WORK/$image-rootfs
	mkdir -p "$dl" "$ex"

	[[ -d $APT_DIR/$suite/state/lists && -n $(ls "$APT_DIR/$suite/state/lists" | grep -v -e partial -e lock) ]] ||
		suite_apt "$suite" update -qq
	local have
	have=$(suite_version "$suite" "$tools")
	if [[ $have != "$ver" ]]; then
		suite_apt "$suite" update -qq
		have=$(suite_version "$suite" "$tools")
	fi
	if [[ $have != "$ver" ]] && ! ls "$APT_DIR/$suite/cache/archives/${tools}_${ver//:/%3a}_"*.deb >/dev/null 2>&1; then
		echo "$image: $suite has $tools $have, the pin (SERVERS in $SELF) is $ver" >&2
		exit 1
	fi

	# The roots (the server, its tools, dash, coreutils) without their dependencies (the
	# tools' would bring adduser or systemd), then the closure of their library dependencies.
	local roots=("$server=$ver" "$tools=$ver") shell
	for shell in dash coreutils libc-bin; do roots+=("$shell=$(suite_version "$suite" "$shell")"); done
	local libs
	mapfile -t libs < <(for p in "${roots[@]}"; do APT=apt-cache suite_apt "$suite" show "$p"; done |
		awk '/^(Pre-)?Depends:/ {sub(/^[^:]*: /, ""); n = split($0, d, ", "); for (i = 1; i <= n; i++) {split(d[i], a, " "); print a[1]}}' |
		grep '^lib' | sort -u)
	local closure
	mapfile -t closure < <(suite_apt "$suite" -s install --no-install-recommends "${libs[@]}" |
		awk '/^Inst / {v = $3; sub(/^\(/, "", v); print $2 "=" v}')
	[[ ${#closure[@]} -gt 0 ]] || { echo "$image: no libraries resolved in $suite" >&2; exit 1; }
	local debs deb
	mapfile -t debs < <(suite_fetch "$suite" "${roots[@]}" "${closure[@]}")
	for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$ex"; done

	local user=$engine uid=$REDIS_UID # the official images' account: redis or valkey, 999
	base_rootfs "$rootfs" "$uid" "$user"
	mkdir -p "$rootfs/usr/bin" "$rootfs/usr/sbin" "$rootfs/usr/lib/x86_64-linux-gnu" "$rootfs/usr/lib64" "$rootfs/data" "$rootfs/etc/$engine"
	ln -s usr/bin "$rootfs/bin"
	ln -s usr/sbin "$rootfs/sbin"
	ln -s usr/lib "$rootfs/lib"
	ln -s usr/lib64 "$rootfs/lib64"
	cp -a "$ex"/usr/bin/"$engine"-* "$rootfs/usr/bin/"
	if [[ $engine == valkey ]]; then
		# As the official Valkey image (upstream's `make install`, USE_REDIS_SYMLINKS=yes): the
		# Redis names too, so the operator's pods (command redis-server) and scripts run unchanged.
		local b
		for b in server cli benchmark check-aof check-rdb; do
			[[ -e $rootfs/usr/bin/valkey-$b ]] && ln -s "valkey-$b" "$rootfs/usr/bin/redis-$b"
		done
	fi
	local t
	for t in "${REDIS_TOOLS[@]}"; do cp "$ex$t" "$rootfs/usr/bin/"; done
	ln -s dash "$rootfs/usr/bin/sh"
	# C.UTF-8, as in the official (Debian-based) images: Redis 8 and Valkey 8 refuse to start
	# when LANG or LC_ALL names a locale the image lacks.
	mkdir -p "$rootfs/usr/lib/locale"
	cp -a "$ex/usr/lib/locale/C.utf8" "$rootfs/usr/lib/locale/"
	local p
	for p in "$server" "$tools"; do
		mkdir -p "$rootfs/usr/share/doc/$p"
		cp "$ex/usr/share/doc/$p/copyright" "$rootfs/usr/share/doc/$p/"
	done

	# The libraries: follow DT_NEEDED from every binary through the suite's library directories.
	local queue=() elf so src
	for elf in "$rootfs"/usr/bin/*; do [[ -L $elf ]] || queue+=("$elf"); done
	while [[ ${#queue[@]} -gt 0 ]]; do
		elf=${queue[0]} queue=("${queue[@]:1}")
		for so in $(readelf -d "$elf" | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $5); print $5}'); do
			[[ -e $rootfs/usr/lib/x86_64-linux-gnu/$so ]] && continue
			src=
			for d in "$ex/usr/lib/x86_64-linux-gnu" "$ex/lib/x86_64-linux-gnu"; do
				[[ -e $d/$so ]] && { src=$d/$so; break; }
			done
			[[ -n $src ]] || { echo "$image: $elf needs $so, which no package of the closure has" >&2; exit 1; }
			cp -L "$src" "$rootfs/usr/lib/x86_64-linux-gnu/$so"
			queue+=("$rootfs/usr/lib/x86_64-linux-gnu/$so")
		done
	done
	local ld
	ld=$(find "$ex" -name ld-linux-x86-64.so.2 | head -1)
	cp -L "$ld" "$rootfs/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
	ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$rootfs/usr/lib64/ld-linux-x86-64.so.2"
	printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
	printf '%s\n' "${roots[@]}" "${closure[@]}" | sort >"$rootfs/usr/share/doc/devcluster-packages"
	if [[ $(id -u) == 0 ]]; then
		chroot "$rootfs" /usr/bin/redis-server --version >/dev/null
		chroot "$rootfs" /usr/bin/redis-cli --version >/dev/null
		[[ $(chroot "$rootfs" /bin/sh -c 'id -un') == root ]]
		# The server starts (its locale set up) and answers its own cli.
		LANG=C.UTF-8 chroot "$rootfs" /usr/bin/redis-server --port 0 --unixsocket /tmp/s.sock --save '' --appendonly no --dir /tmp >/dev/null 2>&1 9>&- &
		local srv=$! i
		for i in $(seq 50); do [[ -S $rootfs/tmp/s.sock ]] && break; sleep 0.1; done
		[[ $(chroot "$rootfs" /usr/bin/redis-cli -s /tmp/s.sock PING) == PONG ]] || { kill "$srv"; echo "$image: the server does not answer in the image" >&2; exit 1; }
		kill "$srv"
		wait "$srv" || true
		rm -f "$rootfs/tmp/s.sock"
	fi

	local name=docker.io/library/redis:$tag
	[[ $engine == valkey ]] && name=docker.io/valkey/valkey:$tag
	imagebuild -rootfs "$rootfs" -name "$name" -o "$OUT/$image.tar.new" \
		-cmd "[\"$engine-server\"]" -user "$uid:$uid" -workdir /data \
		-chown "/data=$uid:$uid" \
		-label "org.opencontainers.image.version=$ver"
	mv "$OUT/$image.tar.new" "$OUT/$image.tar"
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
	redis-8.0 | valkey-8.1 | valkey-9.1) key=$img pin="server_pin $img" build="build_server $img" files=("$img") ;;
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
