#!/usr/bin/env bash
# The interop suite: sipedge against Kamailio, SIPp and baresip on loopback.
#
#   bench/interop/run.sh [-j N] [FLOW...]     run the flows (all by default)
#   bench/interop/run.sh -l                   list them
#
# Builds sipedge once (or takes the binary SIPEDGE names), then runs each flow (flows.sh) in its own process
# (flow.sh), N at a time (default 1), each bounded by FLOW_TIMEOUT seconds
# (60). A flow is PASS or FAIL; one listed in known_failures is KNOWN
# while it fails as listed, and NOW PASSING once it passes. Prints a line
# per flow as it ends, then the table of all, then "interop: P passed,
# F failed". Exits non-zero on a FAIL or NOW PASSING (a listed flow that
# passes must leave the list), or when a flow could not run.
#
# Everything lives in one mktemp directory (the flows' logs in logs/,
# their files in work/ when they failed): removed when the suite passes
# unless KEEP=1, kept and named otherwise.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
GO=${GO:-go}
FLOW_TIMEOUT=${FLOW_TIMEOUT:-60}
. "$HERE/flows.sh"

usage() {
	echo "usage: $0 [-j N] [FLOW...] | $0 -l" >&2
	exit 2
}

JOBS=1
while getopts "j:l" opt; do
	case $opt in
	j) [[ $OPTARG =~ ^[1-9][0-9]*$ ]] || usage; JOBS=$OPTARG ;;
	l)
		for f in "${FLOWS[@]}"; do printf '%-30s %s\n' "${f%%|*}" "${f#*|}"; done
		exit 0
		;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))

declare -A DESC KNOWN_RFC KNOWN_WHY KNOWN_SIG RESULT REASON SECS
ORDER=()
for f in "${FLOWS[@]}"; do
	name=${f%%|*}
	DESC[$name]=${f#*|}
	ORDER+=("$name")
	declare -F "flow_${name//-/_}" >/dev/null || { echo "run.sh: $name is listed in FLOWS but has no flow_${name//-/_}" >&2; exit 2; }
done
for fn in $(declare -F | awk '$3 ~ /^flow_/ {print $3}'); do
	name=${fn#flow_}
	name=${name//_/-}
	[ -n "${DESC[$name]:-}" ] || { echo "run.sh: $fn is not listed in FLOWS" >&2; exit 2; }
done
while IFS='|' read -r name rfc why sig; do
	name=$(xargs <<<"$name")
	[ -z "$name" ] || [[ $name == \#* ]] && continue
	[ -n "${DESC[$name]:-}" ] || { echo "run.sh: known_failures names $name, which is no flow" >&2; exit 2; }
	KNOWN_RFC[$name]=$(xargs <<<"$rfc")
	KNOWN_WHY[$name]=$(sed -E 's/^ +| +$//g' <<<"$why")
	KNOWN_SIG[$name]=$(sed -E 's/^ +| +$//g' <<<"$sig")
	[ -n "${KNOWN_SIG[$name]}" ] || { echo "run.sh: known_failures: $name has no signature" >&2; exit 2; }
done <"$HERE/known_failures"

if [ $# -gt 0 ]; then
	for name; do [ -n "${DESC[$name]:-}" ] || { echo "run.sh: no flow $name (-l lists them)" >&2; exit 2; }; done
	ORDER=("$@")
fi

missing=
for tool in sipp kamailio baresip curl ss timeout awk "$GO"; do
	command -v "$tool" >/dev/null || missing+=" $tool"
done
[ -z "$missing" ] || { echo "run.sh: not found:$missing (make interop installs sip-tester, kamailio, baresip-core)" >&2; exit 1; }

SUITE=$(mktemp -d "${TMPDIR:-/tmp}/sipedge-interop.XXXXXX")
mkdir -p "$SUITE/logs" "$SUITE/work"
if [ -n "${SIPEDGE:-}" ]; then
	[ -x "$SIPEDGE" ] || { echo "run.sh: SIPEDGE=$SIPEDGE is not an executable" >&2; exit 1; }
	echo "interop: testing $SIPEDGE" >&2
	cp "$SIPEDGE" "$SUITE/sipedge"
else
	echo "interop: building sipedge into $SUITE" >&2
	(cd "$REPO" && "$GO" build -o "$SUITE/sipedge" ./cmd/sipedge) || { echo "run.sh: go build failed" >&2; exit 1; }
fi

# run_flow NAME INDEX: run one flow; its result goes to
# SUITE/logs/NAME.result as "SECONDS STATUS REASON". Its ports come from
# a slice of 1,000 of its own (by INDEX, one of 12; the last 20 left for
# a block that starts near its end), so that flows running
# at once never pick the same, and below Linux's ephemeral ports (32768
# up), which the parts' outgoing TCP connections take.
run_flow() {
	local name=$1 slice=$(($2 % 12)) t0 t1 rc=0 line status reason
	t0=$(date +%s.%N)
	PICK_FROM=$((20000 + slice * 1000)) PICK_SPAN=980 \
		SIPEDGE_BIN=$SUITE/sipedge TMPDIR=$SUITE/work timeout -s TERM -k 10 "$FLOW_TIMEOUT" \
		bash "$HERE/flow.sh" "$name" >"$SUITE/logs/$name.log" 2>&1 </dev/null || rc=$?
	t1=$(date +%s.%N)
	line=$(grep -a '^RESULT ' "$SUITE/logs/$name.log" | tail -1)
	case $line in
	"RESULT PASS") status=PASS reason= ;;
	"RESULT FAIL "*) status=FAIL reason=${line#RESULT FAIL } ;;
	*)
		status=FAIL
		if [ "$rc" = 124 ]; then
			reason="timed out after ${FLOW_TIMEOUT}s"
		else
			reason="could not run (exit $rc): $(grep -a -v '^$' "$SUITE/logs/$name.log" | tail -1 | cut -c1-200)"
		fi
		;;
	esac
	printf '%s %s %s\n' "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" "$status" "$reason" \
		>"$SUITE/logs/$name.result"
}

# classify NAME: RESULT, REASON and SECS of a finished flow, its known
# failure taken into account; prints its line.
classify() {
	local name=$1 secs status reason
	read -r secs status reason <"$SUITE/logs/$name.result"
	if [ -n "${KNOWN_SIG[$name]:-}" ]; then
		if [ "$status" = PASS ]; then
			status="NOW PASSING" reason="passes: delete its line from bench/interop/known_failures"
		elif [[ $reason == *"${KNOWN_SIG[$name]}"* ]]; then
			status=KNOWN
		else
			reason="fails otherwise than known_failures says ('${KNOWN_SIG[$name]}'): $reason"
		fi
	fi
	RESULT[$name]=$status REASON[$name]=$reason SECS[$name]=$secs
	printf '%-11s %-28s %5ss  %s\n' "$status" "$name" "$secs" "$reason"
}

[ "$JOBS" -le 12 ] || { echo "run.sh: -j $JOBS: at most 12 flows at once (their port slices)" >&2; exit 2; }
T0=$(date +%s.%N)
declare -A PID_OF
running=0 index=0
for name in "${ORDER[@]}"; do
	if [ "$running" -ge "$JOBS" ]; then
		wait -n
		running=$((running - 1))
	fi
	run_flow "$name" "$index" &
	index=$((index + 1))
	PID_OF[$name]=$!
	running=$((running + 1))
	if [ "$JOBS" = 1 ]; then
		wait "${PID_OF[$name]}"
		running=0
		classify "$name"
	fi
done
wait
if [ "$JOBS" != 1 ]; then
	for name in "${ORDER[@]}"; do classify "$name"; done
fi
ELAPSED=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')

# --- the table -------------------------------------------------------------
passed=0 failed=0 known=0
echo
echo "| flow | result | s | what it checks; why it fails |"
echo "|---|---|---|---|"
for name in "${ORDER[@]}"; do
	case ${RESULT[$name]} in
	PASS) passed=$((passed + 1)) ;;
	KNOWN) known=$((known + 1)) ;;
	*) failed=$((failed + 1)) ;;
	esac
	why=${DESC[$name]}
	if [ "${RESULT[$name]}" = KNOWN ]; then
		why+="; today sipedge ${KNOWN_WHY[$name]} (${KNOWN_RFC[$name]})"
	elif [ -n "${REASON[$name]}" ]; then
		why+="; ${REASON[$name]}"
	fi
	echo "| $name | ${RESULT[$name]} | ${SECS[$name]} | $why |"
done
echo
echo "interop: ${#ORDER[@]} flows in ${ELAPSED}s, $known known failures (bench/interop/known_failures); logs in $SUITE/logs"
echo "interop: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
	echo "interop: FAILED; kept $SUITE" >&2
	exit 1
fi
[ -n "${KEEP:-}" ] || rm -rf "$SUITE"
exit 0
