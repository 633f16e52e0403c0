#!/usr/bin/env bash
# The single test entry point (`make test`, and `.ci/run` through it): installs or builds what
# is missing, then runs go vet, the unit and envtest tests (with -race), and the end-to-end
# suite on the devcluster. Any failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$ROOT/bin:$PATH

step() { echo; echo "=== $* ($(date +%T))"; }
start=$(date +%s)

step "Installing and building tools"
make --no-print-directory tools

step "Generated files and formatting are current"
make --no-print-directory verify-generated
unformatted=$(gofmt -l $(git ls-files '*.go'))
[[ -z $unformatted ]] || { echo "Not gofmt-ed:"; echo "$unformatted"; exit 1; }
(cd templates && cue fmt --check ./...) || { echo "'cue fmt' would change files under templates/"; exit 1; }

step "go vet"
go vet ./...
go vet -tags e2e ./test/e2e/...

step "Unit and envtest tests"
KUBEBUILDER_ASSETS=$ROOT/bin go test -race -count=1 ./...

step "End-to-end tests on the devcluster"
go test -tags e2e -count=1 -p 1 -timeout 60m -v ./test/e2e/...

echo
echo "All tests passed in $(($(date +%s) - start))s"
