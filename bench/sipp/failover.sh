#!/usr/bin/env bash
# SIPp failover scenario through sipedge on loopback.
#
#   bench/sipp/failover.sh [CALLS [RATE]]      (default 50 calls at 10 calls/s)
#
# Two SIPp UAS play two carriers: carrier-a (bench/sipp/uas_503.xml) answers
# every INVITE 100 then 503 Service Unavailable; carrier-b (-sn uas) answers.
# sipedge is configured with static routes "" -> [carrier-a, carrier-b]
# (cheapest first), so every call fails over from carrier-a to carrier-b.
#
# carrier-a is a pinned next_hop, not a gateway group: a YAML group's
# passive health counts 503s and, after 3 in a row, marks its member down,
# so sipedge would then skip carrier-a without dialling it (dialed:false,
# group_down). That is right, but it is gateway health, not the failover
# this scenario measures: here every call must reach carrier-a.
# A SIPp UAC (-sn uac) places CALLS calls at RATE calls/s over UDP.
#
# Exit status is non-zero unless: every UAC call succeeded; carrier-a got an
# INVITE for every call; carrier-b answered every call; sipedge wrote one
# CDR per call, each with final_code 200, carrier_id carrier-b and an
# lcr_attempts entry {carrier_id carrier-a, status 503, dialed true}.
# Temporary files live in one mktemp directory: kept (and its path printed)
# on failure, removed on success unless KEEP=1. Same approach as run.sh
# (free ports, readiness via /readyz, cleanup trap).
set -uo pipefail

usage() {
	echo "usage: $0 [CALLS [RATE]]" >&2
	exit 2
}

[ $# -le 2 ] || usage
CALLS=${1:-50}
RATE=${2:-10}
[[ $CALLS =~ ^[1-9][0-9]*$ ]] || usage
[[ $RATE =~ ^[1-9][0-9]*$ ]] || usage

SIPP=${SIPP:-sipp}
GO=${GO:-go}
LIMIT=$((RATE * 4 > 200 ? RATE * 4 : 200))
UAC_TIMEOUT=$((CALLS / RATE + 30))

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sipedge-sipp-failover.XXXXXX")
OK=0
SIPEDGE_PID=
UAS_A_PID=
UAS_B_PID=
UAC_PID=

log() { echo "failover.sh: $*" >&2; }

# stop PID: SIGTERM, wait up to $2 seconds, then SIGKILL.
stop() {
	local pid=$1 grace=${2:-10} i
	[ -n "$pid" ] || return 0
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < grace * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid did not stop on SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	return 0
}

cleanup() {
	stop "$UAC_PID" 5
	stop "$UAS_A_PID" 5
	stop "$UAS_B_PID" 5
	stop "$SIPEDGE_PID" 40
	if [ "$OK" = 1 ] && [ -z "${KEEP:-}" ]; then
		rm -rf "$WORK"
	elif [ "$OK" = 1 ]; then
		log "KEEP set; files kept in $WORK"
	else
		log "FAILED; files kept in $WORK"
		echo "  sipedge log: $WORK/sipedge.log  CDRs: $WORK/cdr.jsonl" >&2
		echo "  SIPp: $WORK/uac_* $WORK/uas_a_* $WORK/uas_b_*" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	log "$*"
	exit 1
}

command -v "$SIPP" >/dev/null || fail "sipp not found (Debian package sip-tester)"
command -v curl >/dev/null || fail "curl not found"

# --- free ports ------------------------------------------------------------
USED=" $(ss -Hantu 2>/dev/null | awk '{n = split($5, a, ":"); print a[n]}' | sort -un | tr '\n' ' ') "
PICKED=" "
# pick_port [N]: a random port P with P..P+N-1 all free and not yet picked.
# It runs in a subshell ($(...)), so the caller records the pick in PICKED.
pick_port() {
	local n=${1:-1} p i tries
	for ((tries = 0; tries < 1000; tries++)); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		for ((i = 0; i < n; i++)); do
			case "$USED$PICKED" in *" $((p + i)) "*) continue 2 ;; esac
		done
		echo "$p"
		return 0
	done
	fail "no free port found"
}
# pick VAR [N]: VAR=a free port (N consecutive free ports from it).
pick() {
	local p i
	p=$(pick_port "${2:-1}") || exit 1
	for ((i = 0; i < ${2:-1}; i++)); do PICKED+="$((p + i)) "; done
	printf -v "$1" '%s' "$p"
}
pick SIP_PORT
pick ADMIN_PORT
pick UAS_A_PORT
pick UAS_B_PORT
pick UAC_PORT
# SIPp also binds a control socket (-cp) and RTP echo sockets (-mp, +2).
pick UAS_A_CP
pick UAS_B_CP
pick UAC_CP
pick UAS_A_MP 4
pick UAS_B_MP 4
pick UAC_MP 4

# --- build -----------------------------------------------------------------
log "building sipedge into $WORK"
(cd "$REPO" && "$GO" build -o "$WORK/sipedge" ./cmd/sipedge) || fail "go build failed"

# --- config ----------------------------------------------------------------
cat >"$WORK/sipedge.yaml" <<EOF
listen: ["udp://127.0.0.1:$SIP_PORT", "tcp://127.0.0.1:$SIP_PORT"]
admin: { listen: "127.0.0.1:$ADMIN_PORT" }
log: { level: info, file: "$WORK/sipedge.log" }
b2bua: { drain_timeout_secs: 10 }
trunks:
  - { name: sipp, trunk_group: sipp-trunks, sources: ["127.0.0.1/32"] }
gateway:
  groups:
    - name: carrier-b
      destinations:
        - { uri: "sip:127.0.0.1:$UAS_B_PORT", address: "127.0.0.1:$UAS_B_PORT" }
lcr:
  static_routes:
    - prefix: ""
      routes:
        - { carrier_id: carrier-a, next_hop: "sip:127.0.0.1:$UAS_A_PORT", rate: 0.004, timeout_secs: 5 }
        - { carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005 }
cdr: { file: "$WORK/cdr.jsonl" }
EOF
"$WORK/sipedge" check-config -config "$WORK/sipedge.yaml" >"$WORK/effective.yaml" 2>&1 ||
	fail "bad config: $(cat "$WORK/effective.yaml")"

# --- sipedge ---------------------------------------------------------------
"$WORK/sipedge" run -config "$WORK/sipedge.yaml" >"$WORK/sipedge.out" 2>&1 &
SIPEDGE_PID=$!
ready=0
for ((i = 0; i < 100; i++)); do
	kill -0 "$SIPEDGE_PID" 2>/dev/null || break
	if curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$ADMIN_PORT/readyz" 2>/dev/null; then
		ready=1
		break
	fi
	sleep 0.1
done
if [ "$ready" != 1 ]; then
	cat "$WORK/sipedge.out" "$WORK/sipedge.log" >&2 2>/dev/null
	fail "sipedge did not become ready on 127.0.0.1:$ADMIN_PORT"
fi
log "sipedge pid $SIPEDGE_PID ready: SIP udp 127.0.0.1:$SIP_PORT, admin 127.0.0.1:$ADMIN_PORT"

# --- the two carriers ----------------------------------------------------------
# Each UAS exits by itself after CALLS calls (-m), writing its final
# statistics; a UAS still running at the end is stopped.
# start_uas NAME PORT CP MP SCENARIO...
start_uas() {
	local name=$1 port=$2 cp=$3 mp=$4
	shift 4
	(cd "$WORK" && exec "$SIPP" "$@" -t u1 -i 127.0.0.1 -p "$port" \
		-mi 127.0.0.1 -mp "$mp" -cp "$cp" -nostdin -m "$CALLS" \
		-trace_stat -stf "$WORK/uas_${name}_stat.csv" -fd 1 \
		-trace_err -error_file "$WORK/uas_${name}_errors.log" \
		-trace_screen -screen_file "$WORK/uas_${name}_screen.log" \
		>"$WORK/uas_$name.out" 2>&1) &
}
wait_listening() {
	local pid=$1 port=$2 name=$3 i
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || fail "SIPp UAS $name exited: $(tail -5 "$WORK/uas_$name.out")"
		ss -Hlun "sport = :$port" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	fail "SIPp UAS $name does not listen on $port"
}
start_uas a "$UAS_A_PORT" "$UAS_A_CP" "$UAS_A_MP" -sf "$HERE/uas_503.xml"
UAS_A_PID=$!
start_uas b "$UAS_B_PORT" "$UAS_B_CP" "$UAS_B_MP" -sn uas
UAS_B_PID=$!
wait_listening "$UAS_A_PID" "$UAS_A_PORT" a
wait_listening "$UAS_B_PID" "$UAS_B_PORT" b

# --- SIPp UAC --------------------------------------------------------------
log "SIPp UAC: $CALLS calls at $RATE/s (carrier-a answers 503, carrier-b answers)"
T0=$(date +%s.%N)
(cd "$WORK" && exec timeout -s TERM -k 5 $((UAC_TIMEOUT + 5)) \
	"$SIPP" -sn uac "127.0.0.1:$SIP_PORT" -t u1 -i 127.0.0.1 -p "$UAC_PORT" \
	-mi 127.0.0.1 -mp "$UAC_MP" -cp "$UAC_CP" \
	-r "$RATE" -m "$CALLS" -l "$LIMIT" -nostdin \
	-timeout "${UAC_TIMEOUT}s" -timeout_error \
	-trace_stat -stf "$WORK/uac_stat.csv" -fd 1 \
	-trace_screen -screen_file "$WORK/uac_screen.log" \
	-trace_err -error_file "$WORK/uac_errors.log" \
	>"$WORK/uac.out" 2>&1) &
UAC_PID=$!
wait "$UAC_PID"
UAC_RC=$?
UAC_PID=
T1=$(date +%s.%N)

# The carriers have seen every call by now; give them a moment to finish
# their last calls (-m) and exit on their own, then stop what is left.
for ((i = 0; i < 50; i++)); do
	kill -0 "$UAS_A_PID" 2>/dev/null || kill -0 "$UAS_B_PID" 2>/dev/null || break
	sleep 0.1
done
stop "$UAS_A_PID" 5
UAS_A_PID=
stop "$UAS_B_PID" 5
UAS_B_PID=
kill -0 "$SIPEDGE_PID" 2>/dev/null || fail "sipedge died during the run: $(tail -5 "$WORK/sipedge.out" "$WORK/sipedge.log" 2>/dev/null)"
stop "$SIPEDGE_PID" 40
SIPEDGE_PID=

# --- statistics ------------------------------------------------------------
# stat FILE COLUMN: the last (final, cumulative) value of a SIPp statistics column.
stat() {
	awk -F';' -v col="$2" '
		NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
		{ last = $c }
		END { if (c == "" || last == "") print "?"; else print last + 0 }
	' "$1" 2>/dev/null || echo "?"
}
ATTEMPTED=$(stat "$WORK/uac_stat.csv" 'TotalCallCreated')
SUCCEEDED=$(stat "$WORK/uac_stat.csv" 'SuccessfulCall(C)')
FAILED=$(stat "$WORK/uac_stat.csv" 'FailedCall(C)')
A_INVITES=$(stat "$WORK/uas_a_stat.csv" 'TotalCallCreated')
A_DONE=$(stat "$WORK/uas_a_stat.csv" 'SuccessfulCall(C)')
B_INVITES=$(stat "$WORK/uas_b_stat.csv" 'TotalCallCreated')
B_DONE=$(stat "$WORK/uas_b_stat.csv" 'SuccessfulCall(C)')

# CDR lines, and those showing the failover: answered by carrier-b after a
# dialled 503 attempt on carrier-a. sipedge writes compact JSON with a
# fixed field order, so plain regular expressions suffice.
CDRS=0 CDR200=0 CDRB=0 CDRFAILOVER=0 CDRGOOD=0
if [ -f "$WORK/cdr.jsonl" ]; then
	read -r CDRS CDR200 CDRB CDRFAILOVER CDRGOOD < <(awk '
		/./ { n++ }
		{ f = /"final_code":200[,}]/; b = /"carrier_id":"carrier-b","rate":/
		  a = /"lcr_attempts":\[[^]]*\{"carrier_id":"carrier-a","status":503,"elapsed_ms":[0-9]+,"dialed":true[,}]/
		  c200 += f; cb += b; ca += a; good += (f && b && a) }
		END { print n + 0, c200 + 0, cb + 0, ca + 0, good + 0 }' "$WORK/cdr.jsonl")
fi
ELAPSED=$(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.2f", b - a }')

cat <<EOF
sipedge SIPp failover: $CALLS calls at $RATE/s over udp, carrier-a answers 503, carrier-b answers; UAC exit $UAC_RC
  UAC calls:          $ATTEMPTED attempted, $SUCCEEDED succeeded, $FAILED failed (in ${ELAPSED}s)
  carrier-a (503):    $A_INVITES INVITEs received, $A_DONE 503s ACKed
  carrier-b (answer): $B_INVITES INVITEs received, $B_DONE calls completed
  CDR lines:          $CDRS: $CDR200 final_code 200, $CDRB carrier_id carrier-b, $CDRFAILOVER with carrier-a 503 dialed:true in lcr_attempts, $CDRGOOD with all three
EOF
[ -s "$WORK/cdr.jsonl" ] && { echo "  first CDR:"; head -1 "$WORK/cdr.jsonl" | sed 's/^/    /'; }

# --- verdict -----------------------------------------------------------------
bad=0
num() { [[ $1 =~ ^[0-9]+$ ]]; }
if ! num "$ATTEMPTED" || ! num "$SUCCEEDED" || ! num "$FAILED" || ! num "$A_INVITES" || ! num "$B_INVITES"; then
	log "FAIL: cannot read SIPp statistics (uac_stat.csv, uas_a_stat.csv, uas_b_stat.csv)"
	tail -20 "$WORK/uac.out" >&2
	bad=1
else
	[ "$ATTEMPTED" -eq "$CALLS" ] || { log "FAIL: $ATTEMPTED calls attempted, want $CALLS"; bad=1; }
	[ "$FAILED" -eq 0 ] || { log "FAIL: $FAILED calls failed"; bad=1; }
	[ "$SUCCEEDED" -eq "$CALLS" ] || { log "FAIL: $SUCCEEDED of $CALLS calls succeeded"; bad=1; }
	[ "$A_INVITES" -eq "$CALLS" ] || { log "FAIL: carrier-a (503) received $A_INVITES INVITEs, want $CALLS"; bad=1; }
	[ "$B_INVITES" -eq "$CALLS" ] || { log "FAIL: carrier-b received $B_INVITES INVITEs, want $CALLS"; bad=1; }
	[ "$CDRS" -eq "$CALLS" ] || { log "FAIL: $CDRS CDR lines for $CALLS calls"; bad=1; }
	[ "$CDRGOOD" -eq "$CALLS" ] || {
		log "FAIL: $CDRGOOD of $CALLS CDRs have final_code 200, carrier_id carrier-b and a dialed 503 attempt on carrier-a"
		bad=1
	}
fi
if [ "$UAC_RC" -ne 0 ] && [ "$bad" = 0 ]; then
	log "FAIL: SIPp UAC exit status $UAC_RC"
	tail -20 "$WORK/uac.out" >&2
	bad=1
fi
if [ "$bad" != 0 ]; then
	for f in uac_errors.log uas_a_errors.log uas_b_errors.log; do
		[ -s "$WORK/$f" ] && { log "first lines of $f:"; head -20 "$WORK/$f" >&2; }
	done
	grep -vE '"final_code":200[,}]' "$WORK/cdr.jsonl" 2>/dev/null | head -3 >&2
	grep -E 'level=(WARN|ERROR)' "$WORK/sipedge.log" 2>/dev/null | head -20 >&2
	exit 1
fi
OK=1
exit 0
