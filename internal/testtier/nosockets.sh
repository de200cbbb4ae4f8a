#!/usr/bin/env bash
# nosockets.sh: proves the fast tier opens no socket. Builds each package's
# test binary (go test -c: the go command itself may talk to the module
# proxy, its test binaries must not), runs it with -test.short under
# strace -f (children included: a test that runs sipedge, redis-server or
# sipp as a child is caught too) and fails, naming the test, if any
# socket(2), socketpair(2), connect(2) or bind(2) was called.
#
# usage: bash internal/testtier/nosockets.sh [PACKAGES]   (default ./...)
set -euo pipefail
command -v strace >/dev/null || { echo "nosockets.sh: strace is not installed (apt-get install strace)" >&2; exit 2; }
GO=${GO:-go}
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
for pkg in $($GO list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "${@:-./...}" | tr ' ' ':'); do
	path=${pkg%%:*} pkgdir=${pkg#*:}
	bin=$dir/$(echo "$path" | tr / _).test
	$GO test -c -o "$bin" "$path"
	# write(1, ...) is traced only to tell which test was running.
	(cd "$pkgdir" && strace -f -qq -e signal=none -e trace=socket,socketpair,connect,bind,write -s 100 -o "$bin.strace" \
		"$bin" -test.short -test.count=1 -test.v >"$bin.out" 2>&1) || { echo "FAIL $path: tests failed"; tail -20 "$bin.out"; fail=1; continue; }
	found=$(awk '
		/write\(1, "=== (RUN|CONT) / { t = $0; sub(/.*=== (RUN|CONT) +/, "", t); sub(/\\n.*/, "", t); next }
		/ (socket|socketpair|connect|bind)\(/ && !/ write\(/ { n[t == "" ? "(package init)" : t]++ }
		END { for (k in n) printf "  %s: %d calls\n", k, n[k] }' "$bin.strace")
	if [ -n "$found" ]; then
		echo "FAIL $path opens sockets under -short:"; echo "$found"; fail=1
	else
		echo "ok   $path"
	fi
done
exit $fail
