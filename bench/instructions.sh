#!/usr/bin/env bash
# Instructions per op of a Go benchmark, counted by callgrind: a figure that
# does not move with the machine's speed or load, for before/after
# comparisons of one change.
#
#   bash bench/instructions.sh PKG BENCH [N]
#   bash bench/instructions.sh ./bench 'CallFlowFailover$'
#
# The benchmark binary runs twice under valgrind, N and 2N iterations
# (-test.benchtime Nx, N 20000 by default), with GOGC=off and GOMAXPROCS=1;
# the difference of the two totals over N is the cost of one op, setup and
# warm-up cancelled out. Needs valgrind (apt-get install valgrind).
set -euo pipefail
pkg=${1:?usage: instructions.sh PKG BENCH [N]}
bench=${2:?usage: instructions.sh PKG BENCH [N]}
n=${3:-20000}
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/b.test" "$pkg"
# Valgrind 3.19 knows neither RDTSCP, which the runtime's lock profiling
# reads when a lock is contended, nor Go's preemption signals: without these
# settings a run dies of SIGILL or an assertion now and then.
godebug=${GODEBUG:+$GODEBUG,}cpu.rdtscp=off,asyncpreemptoff=1
count() {
	(cd "$pkg" && GODEBUG=$godebug GOGC=off GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file="$dir/cg.$1" \
		"$dir/b.test" -test.run '^$' -test.bench "$bench" -test.benchtime "${1}x" -test.count 1 \
		>/dev/null 2>"$dir/vg.$1") || { cat "$dir/vg.$1" >&2; exit 1; }
	sed -n 's/^summary: //p' "$dir/cg.$1"
}
one=$(count "$n")
two=$(count $((2 * n)))
echo "$bench $(( (two - one) / n )) instructions/op"
