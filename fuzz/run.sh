#!/usr/bin/env bash
# Runs one fuzz target for FUZZTIME (make fuzz calls it for each target).
#
#   fuzz/run.sh TARGET FUZZTIME [PACKAGE]    (PACKAGE defaults to ./fuzz/)
#
# Go's fuzzing coordinator can fail a run that found nothing, printing a
# bare "context deadline exceeded" as -fuzztime expires: a race between the
# deadline of its context and the cancellation of the workers' child
# context (go.dev/issue/75804, fixed in go1.27). A real finding always
# writes its input first ("Failing input written to"), so a failure with the
# race's message and no input written is run again, up to three times in
# all; anything else fails at once.
set -uo pipefail
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 TARGET FUZZTIME [PACKAGE]" >&2; exit 2; }
target=$1 fuzztime=$2 pkg=${3:-./fuzz/}
GO=${GO:-go}
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for try in 1 2 3; do
	if $GO test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s "$pkg" 2>&1 | tee "$out"; then
		exit 0
	fi
	if ! grep -q 'context deadline exceeded' "$out" || grep -q 'Failing input written to' "$out"; then
		exit 1
	fi
	echo "fuzz/run.sh: $target: the coordinator's deadline race (go.dev/issue/75804), no input written; run $((try + 1)) of 3" >&2
done
exit 1
