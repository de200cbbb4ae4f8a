#!/usr/bin/env bash
# The fault campaign: sipedge under routing API, Redis, carrier, drain and
# hostile-input faults, with SIPp, a real redis-server and sipedge built
# from the tree, on loopback.
#
#   bench/chaos/run.sh [FAULT...]     run the faults (all by default)
#   bench/chaos/run.sh -l             list them
#
# Builds sipedge once, then runs each fault (faults.sh) in its own process
# (fault.sh), one at a time (they load the machine; the campaign measures
# sipedge, not the other faults), each bounded by FAULT_TIMEOUT seconds
# (180). Prints a line per fault as it ends, then the table: offered,
# answered and failed calls (the caller's SIPp), CDRs written, panics
# (sipedge's output and log), the verdict and the notes. A fault is PASS
# or FAIL; one listed in known_failures is KNOWN while it fails as
# listed, and NOW PASSING once it passes. Exits non-zero on a FAIL or NOW
# PASSING (a listed fault that passes must leave the list), or when a
# fault could not run.
#
# The faults' durations and rates are variables (README.md); everything
# lives in one mktemp directory (the faults' logs in logs/, their files in
# work/ when they failed), removed when the campaign passes unless KEEP=1,
# kept and named otherwise.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
GO=${GO:-go}
FAULT_TIMEOUT=${FAULT_TIMEOUT:-180}
. "$HERE/faults.sh"

usage() {
	echo "usage: $0 [FAULT...] | $0 -l" >&2
	exit 2
}

declare -A DESC KNOWN_ITEM KNOWN_WHY KNOWN_SIG RESULT REASON SECS ROW NOTE_OF
ORDER=()
for f in "${FAULTS[@]}"; do
	IFS='|' read -r name family desc <<<"$f"
	DESC[$name]=$desc
	ORDER+=("$name")
	declare -F "fault_${name//-/_}" >/dev/null || { echo "run.sh: $name is listed in FAULTS but has no fault_${name//-/_}" >&2; exit 2; }
done
for fn in $(declare -F | awk '$3 ~ /^fault_/ {print $3}'); do
	name=${fn#fault_}
	name=${name//_/-}
	[ -n "${DESC[$name]:-}" ] || { echo "run.sh: $fn is not listed in FAULTS" >&2; exit 2; }
done

while getopts "l" opt; do
	case $opt in
	l)
		for f in "${FAULTS[@]}"; do
			IFS='|' read -r name family desc <<<"$f"
			printf '%-26s %-8s %s\n' "$name" "$family" "$desc"
		done
		exit 0
		;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))

while IFS='|' read -r name item why sig; do
	name=$(xargs <<<"$name")
	[ -z "$name" ] || [[ $name == \#* ]] && continue
	[ -n "${DESC[$name]:-}" ] || { echo "run.sh: known_failures names $name, which is no fault" >&2; exit 2; }
	KNOWN_ITEM[$name]=$(sed -E 's/^ +| +$//g' <<<"$item")
	KNOWN_WHY[$name]=$(sed -E 's/^ +| +$//g' <<<"$why")
	KNOWN_SIG[$name]=$(sed -E 's/^ +| +$//g' <<<"$sig")
	[ -n "${KNOWN_SIG[$name]}" ] || { echo "run.sh: known_failures: $name has no signature" >&2; exit 2; }
done <"$HERE/known_failures"

if [ $# -gt 0 ]; then
	for name; do [ -n "${DESC[$name]:-}" ] || { echo "run.sh: no fault $name (-l lists them)" >&2; exit 2; }; done
	ORDER=("$@")
fi

missing=
for tool in sipp redis-server redis-cli curl ss timeout awk python3 "$GO"; do
	command -v "$tool" >/dev/null || missing+=" $tool"
done
[ -z "$missing" ] || { echo "run.sh: not found:$missing (make deps installs sip-tester, redis-server, curl, iproute2)" >&2; exit 1; }

SUITE=$(mktemp -d "${TMPDIR:-/tmp}/sipedge-chaos.XXXXXX")
mkdir -p "$SUITE/logs" "$SUITE/work"
echo "chaos: building sipedge into $SUITE" >&2
(cd "$REPO" && "$GO" build -o "$SUITE/sipedge" ./cmd/sipedge) || { echo "run.sh: go build failed" >&2; exit 1; }

# run_fault NAME: run one fault; sets RESULT, REASON, SECS, ROW (offered,
# answered, failed, CDRs, panics) and NOTE_OF, its known failure taken
# into account, and prints its line.
run_fault() {
	local name=$1 t0 rc=0 line status reason row
	t0=$(date +%s.%N)
	SIPEDGE_BIN=$SUITE/sipedge TMPDIR=$SUITE/work timeout -s TERM -k 10 "$FAULT_TIMEOUT" \
		bash "$HERE/fault.sh" "$name" >"$SUITE/logs/$name.log" 2>&1 </dev/null || rc=$?
	SECS[$name]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
	line=$(grep -a '^RESULT ' "$SUITE/logs/$name.log" | tail -1)
	NOTE_OF[$name]=$(grep -a '^NOTE ' "$SUITE/logs/$name.log" | cut -c6- | paste -sd ';' | sed 's/;/; /g')
	if [ -n "$line" ]; then
		read -r _ o a f c p status reason <<<"$line"
		row="$o|$a|$f|$c|$p"
	else
		status=FAIL row="?|?|?|?|?"
		if [ "$rc" = 124 ]; then
			reason="timed out after ${FAULT_TIMEOUT}s"
		else
			reason="could not run (exit $rc): $(grep -a -v '^$' "$SUITE/logs/$name.log" | tail -1 | cut -c1-200)"
		fi
	fi
	if [ -n "${KNOWN_SIG[$name]:-}" ]; then
		if [ "$status" = PASS ]; then
			status="NOW PASSING" reason="passes: delete its line from bench/chaos/known_failures"
		elif [[ $reason == *"${KNOWN_SIG[$name]}"* ]]; then
			status=KNOWN
		else
			reason="fails otherwise than known_failures says ('${KNOWN_SIG[$name]}'): $reason"
		fi
	fi
	RESULT[$name]=$status REASON[$name]=$reason ROW[$name]=$row
	printf '%-11s %-26s %4ss  %s\n' "$status" "$name" "${SECS[$name]}" "$reason"
}

T0=$(date +%s.%N)
for name in "${ORDER[@]}"; do run_fault "$name"; done
ELAPSED=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')

# --- the table -------------------------------------------------------------
passed=0 failed=0 known=0
echo
echo "| fault | offered | answered | failed | CDRs | panics | verdict | s | expectation; what happened |"
echo "|---|---|---|---|---|---|---|---|---|"
for name in "${ORDER[@]}"; do
	case ${RESULT[$name]} in
	PASS) passed=$((passed + 1)) ;;
	KNOWN) known=$((known + 1)) ;;
	*) failed=$((failed + 1)) ;;
	esac
	why=${DESC[$name]}
	if [ "${RESULT[$name]}" = KNOWN ]; then
		why+="; KNOWN (${KNOWN_ITEM[$name]}): today sipedge ${KNOWN_WHY[$name]}"
	elif [ -n "${REASON[$name]}" ]; then
		why+="; ${REASON[$name]}"
	fi
	[ -z "${NOTE_OF[$name]}" ] || why+=" [${NOTE_OF[$name]}]"
	IFS='|' read -r o a f c p <<<"${ROW[$name]}"
	echo "| $name | $o | $a | $f | $c | $p | ${RESULT[$name]} | ${SECS[$name]} | $why |"
done
echo
echo "chaos: ${#ORDER[@]} faults in ${ELAPSED}s, $known known failures (bench/chaos/known_failures); logs in $SUITE/logs"
echo "chaos: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
	echo "chaos: FAILED; kept $SUITE" >&2
	exit 1
fi
if [ "$known" -gt 0 ] || [ -n "${KEEP:-}" ]; then
	echo "chaos: kept $SUITE (known failures' files in work/)" >&2
else
	rm -rf "$SUITE"
fi
exit 0
