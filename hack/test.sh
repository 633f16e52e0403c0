#!/usr/bin/env bash
# The single test entry point (`make test`, and `.ci/run` through it): checks the generated
# files, installs or builds what is missing while go vet runs, then runs the unit and envtest
# tests (with -race) and the end-to-end suite on the devcluster (its independent tests four at
# a time). Any failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$ROOT/bin:$PATH

step() { echo; echo "=== $* ($(date +%T))"; }
start=$(date +%s)

step "Generated files and formatting are current"
make --no-print-directory codegen-tools verify-generated
unformatted=$(gofmt -l $(git ls-files '*.go'))
[[ -z $unformatted ]] || { echo "Not gofmt-ed:"; echo "$unformatted"; exit 1; }
(cd templates && cue fmt --check ./...) || { echo "'cue fmt' would change files under templates/"; exit 1; }

# On a fresh machine go vet compiles every package of the module (about 5 minutes), and the
# tools' builds below leave a core idle much of the time (module downloads, the links of
# the big binaries): vet runs beside them. It starts after the generated files are checked,
# so it never reads a file controller-gen is writing.
step "go vet, in the background while the tools build"
vet_log=$(mktemp)
go vet ./... >"$vet_log" 2>&1 &
vet_pid=$!
# The newer servers' images run under the redis package's atomic slot migration tests and
# the backup package's every-server tests (redistest.ServerBinary): built beside the tools
# too (mostly package downloads), once, before the test packages run in parallel, and
# rebuilt only when their inputs changed.
images_log=$(mktemp)
hack/devcluster/images.sh redis-8.0 valkey-8.1 valkey-9.1 >"$images_log" 2>&1 &
images_pid=$!
trap 'kill "$vet_pid" "$images_pid" 2>/dev/null || true' EXIT

step "Installing and building tools"
make --no-print-directory tools

step "go vet"
vet_rc=0 images_rc=0
wait "$vet_pid" || vet_rc=$?
cat "$vet_log"
rm -f "$vet_log"
((vet_rc == 0)) || { echo "go vet ./... failed"; exit 1; }
go vet -tags e2e ./test/e2e/...

step "The newer servers' images"
wait "$images_pid" || images_rc=$?
trap - EXIT
cat "$images_log"
rm -f "$images_log"
((images_rc == 0)) || { echo "hack/devcluster/images.sh redis-8.0 valkey-8.1 valkey-9.1 failed"; exit 1; }

step "Unit and envtest tests"
KUBEBUILDER_ASSETS=$ROOT/bin go test -race -count=1 ./...
# The image builder's module is not under the root module's ./...
(cd hack/devcluster/images && go vet ./imagebuild ./pause && go test -race -count=1 ./imagebuild)

step "End-to-end tests on the devcluster"
# The host as it was, to prove the devcluster's teardown leaves it so (when this run starts the
# devcluster; a developer's running `make demo` is left alone, and so not compared).
host_before=
if [[ ! -f .devcluster/pids/kube-apiserver.pid ]] || ! kill -0 "$(cat .devcluster/pids/kube-apiserver.pid)" 2>/dev/null; then
	host_before=$(mktemp)
	hack/devcluster/hostcheck.sh snapshot "$host_before"
fi
# The e2e output is long; when a test fails, its own last lines are printed again at the
# end, so the tail of the log (all a CI summary may keep) says what failed and why.
e2e_log=$(mktemp)
if ! go test -tags e2e -count=1 -p 1 -parallel 4 -timeout 60m -v ./test/e2e/... 2>&1 | tee "$e2e_log"; then
	echo
	echo "=== What failed: the last lines of each failed test"
	awk '
		/^=== RUN   [^\/]+$/ { name = $3; n = 0 }
		{ buf[n++] = substr($0, 1, 300) }
		/^--- FAIL: / {
			print "--- " $3 ":"
			for (i = (n > 80 ? n - 80 : 0); i < n; i++) print buf[i]
			print ""
		}' "$e2e_log"
	rm -f "$e2e_log"
	exit 1
fi
rm -f "$e2e_log"
if [[ -n $host_before ]]; then
	step "The host is as it was before the devcluster"
	hack/devcluster/hostcheck.sh compare "$host_before"

	# The node agent this bed replaced never reached Running from a checkout under /tmp; the
	# demo must work from any path. A clone there (bin/ hard-linked, so nothing is built
	# again) runs the local tutorial, whose commands include the README's quick start (make
	# demo, redis-cli -c, a scale-out to 4 masters, make demo-down; TestReadmeQuickStartIsTheLocalTutorial
	# keeps the two together), and the host is compared again.
	step "The local tutorial (and so the README's quick start), from a checkout under /tmp"
	clone=$(mktemp -d /tmp/rcop-checkout.XXXXXX)
	git clone -q "$ROOT" "$clone/repo"
	cp -al "$ROOT/bin" "$clone/repo/bin"
	if ! (cd "$clone/repo" && DEMO_TIMEOUT=300 hack/tutorial.sh docs/tutorials/local.md 2>&1 | tail -40); then
		echo "docs/tutorials/local.md failed from $clone/repo; operator log:"
		tail -20 "$clone/repo/.devcluster/logs/manager.log" || true
		(cd "$clone/repo" && make --no-print-directory demo-down) || true
		exit 1
	fi
	(cd "$clone/repo" && make --no-print-directory demo-down)
	rm -rf "$clone"
	hack/devcluster/hostcheck.sh compare "$host_before"
	rm -f "$host_before"
fi

echo
echo "All tests passed in $(($(date +%s) - start))s"
