#!/usr/bin/env bash
# Runs a tutorial as its reader would: every ```sh block of FILE, in order, in one bash
# (set -euo pipefail, so a variable exported by one block is seen by the next), from the
# repository root. Any command that exits non-zero fails the run and names its block. A
# ```text block that follows a ```sh block (blank lines between at most) is what those
# commands print: each of its non-empty lines must appear in their output, or the run fails.
# Blocks of any other language (```console, ```yaml) are shown, not run.
#
#   hack/tutorial.sh docs/tutorials/local.md            (hack/test.sh, from a fresh checkout)
#   hack/tutorial.sh docs/tutorials/any-kubernetes.md   (TestTutorialAnyKubernetes, test/e2e)
#
# The caller provides the Kubernetes: a tutorial that starts its own (make demo) is run where
# no devcluster is up, under the devcluster lock; the others get KUBECONFIG in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:?usage: hack/tutorial.sh FILE.md}
[[ -f $file ]] || { echo "tutorial: no $file" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The script: each sh block behind a marker line; each text block after one into exp.N.
awk -v work="$work" '
	function flush() { if (buf != "") { print buf > (work "/exp." n); close(work "/exp." n) } buf = "" }
	/^```sh$/   { n++; mode = "sh"; last = "sh"; printf "printf %c\\n@@tutorial-block %d\\n%c\n", 39, n, 39 > (work "/script"); next }
	/^```text$/ { if (last == "sh") { mode = "text"; next } mode = "other"; next }
	/^```/      { if (mode == "") { mode = "other"; last = "" } else { if (mode == "text") { flush(); last = "" } mode = "" } next }
	mode == "sh"   { print > (work "/script"); next }
	mode == "text" { buf = buf $0 "\n"; next }
	mode == "other" { next }
	/^[ \t]*$/ { next }
	{ last = "" }
	END { print n > (work "/count") }
' "$file"
count=$(cat "$work/count")
[[ $count -gt 0 ]] || { echo "tutorial: $file has no sh block" >&2; exit 1; }

echo "tutorial: running the $count sh blocks of $file"
start=$(date +%s)
rc=0
bash -euo pipefail "$work/script" </dev/null 2>&1 | tee "$work/out" || rc=$?
# The output per block: out.N.
awk -v work="$work" '
	/^@@tutorial-block [0-9]+$/ { n = $2; printf "" > (work "/out." n); next }
	n { print >> (work "/out." n) }
' "$work/out"
took=$(($(date +%s) - start))
if [[ $rc -ne 0 ]]; then
	last=$(grep -c '^@@tutorial-block ' "$work/out" || true)
	echo "tutorial: $file: block $last of $count exited $rc after ${took}s; it was:" >&2
	awk -v want="$last" '/^printf .\\n@@tutorial-block / { n++; next } n == want' "$work/script" | sed 's/^/    /' >&2
	exit 1
fi
fail=0
for exp in "$work"/exp.*; do
	[[ -e $exp ]] || continue
	n=${exp##*.}
	while IFS= read -r line; do
		[[ -z ${line// /} ]] && continue
		if ! grep -qF -- "$line" "$work/out.$n" 2>/dev/null; then
			echo "tutorial: $file: block $n did not print: $line" >&2
			fail=1
		fi
	done <"$exp"
done
[[ $fail -eq 0 ]] || exit 1
echo "tutorial: $file: all $count sh blocks ran and printed what the page says, in ${took}s"
