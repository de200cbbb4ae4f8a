#!/usr/bin/env bash
# SIPp end to end through sipedge on loopback.
#
#   bench/sipp/run.sh RATE SECONDS [udp|tcp]
#
# Builds sipedge, starts it on free 127.0.0.1 ports with a temporary config
# (one trunk for 127.0.0.1/32, static route "" -> carrier-a -> the SIPp UAS),
# starts a SIPp UAS (-sn uas) and a SIPp UAC (-sn uac) placing RATE calls/s
# for SECONDS seconds, then prints what SIPp counted, the CDRs sipedge wrote
# and sipedge's CPU time per call (utime+stime from /proc/PID/stat, sampled
# just before the UAC starts and just after it ends).
#
# Exit status is non-zero when a call failed, when SIPp's successful calls
# differ from the calls it attempted, or when the CDR count (or the count of
# CDRs with final_code 200) does not match. Temporary files live in one
# mktemp directory: kept (and its path printed) on failure, removed on
# success unless KEEP=1.
set -uo pipefail

usage() {
	echo "usage: $0 RATE SECONDS [udp|tcp]" >&2
	exit 2
}

[ $# -ge 2 ] && [ $# -le 3 ] || usage
RATE=$1
DURATION=$2
TRANSPORT=${3:-udp}
[[ $RATE =~ ^[1-9][0-9]*$ ]] || usage
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || usage
case $TRANSPORT in
udp) SIPP_T=u1 ;;
tcp) SIPP_T=t1 ;;
*) usage ;;
esac

SIPP=${SIPP:-sipp}
GO=${GO:-go}
CALLS=$((RATE * DURATION))
LIMIT=$((RATE * 4 > 200 ? RATE * 4 : 200)) # simultaneous calls cap for the UAC
UAC_TIMEOUT=$((DURATION + 30))

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sipedge-sipp.XXXXXX")
OK=0
SIPEDGE_PID=
UAS_PID=
UAC_PID=

log() { echo "run.sh: $*" >&2; }

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
	stop "$UAS_PID" 5
	stop "$SIPEDGE_PID" 40
	if [ "$OK" = 1 ] && [ -z "${KEEP:-}" ]; then
		rm -rf "$WORK"
	elif [ "$OK" = 1 ]; then
		echo "run.sh: KEEP set; files kept in $WORK" >&2
	else
		echo "run.sh: FAILED; files kept in $WORK" >&2
		echo "  sipedge log: $WORK/sipedge.log  CDRs: $WORK/cdr.jsonl" >&2
		echo "  SIPp: $WORK/uac_* $WORK/uas_*" >&2
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
# Ports in use right now (TCP and UDP, listening or not).
USED=" $(ss -Hantu 2>/dev/null | awk '{n = split($5, a, ":"); print a[n]}' | sort -un | tr '\n' ' ') "
PICKED=" "
# pick_port [N]: a random port P with P..P+N-1 all free and not yet picked.
pick_port() {
	local n=${1:-1} p i tries
	for ((tries = 0; tries < 1000; tries++)); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		for ((i = 0; i < n; i++)); do
			case "$USED$PICKED" in *" $((p + i)) "*) continue 2 ;; esac
		done
		for ((i = 0; i < n; i++)); do PICKED+="$((p + i)) "; done
		echo "$p"
		return 0
	done
	fail "no free port found"
}
SIP_PORT=$(pick_port) || exit 1
PICKED+="$SIP_PORT "
UAS_PORT=$(pick_port) || exit 1
PICKED+="$UAS_PORT "
UAC_PORT=$(pick_port) || exit 1
PICKED+="$UAC_PORT "
ADMIN_PORT=$(pick_port) || exit 1
PICKED+="$ADMIN_PORT "
# SIPp also binds a control socket (-cp) and RTP echo sockets (-mp, +2).
UAS_CP=$(pick_port) || exit 1
PICKED+="$UAS_CP "
UAC_CP=$(pick_port) || exit 1
PICKED+="$UAC_CP "
UAS_MP=$(pick_port 4) || exit 1
PICKED+="$UAS_MP $((UAS_MP + 1)) $((UAS_MP + 2)) $((UAS_MP + 3)) "
UAC_MP=$(pick_port 4) || exit 1

# --- build -----------------------------------------------------------------
log "building sipedge into $WORK"
(cd "$REPO" && "$GO" build -o "$WORK/sipedge" ./cmd/sipedge) || fail "go build failed"

# --- config ----------------------------------------------------------------
GW_URI="sip:127.0.0.1:$UAS_PORT"
[ "$TRANSPORT" = tcp ] && GW_URI+=";transport=tcp"
cat >"$WORK/sipedge.yaml" <<EOF
listen: ["udp://127.0.0.1:$SIP_PORT", "tcp://127.0.0.1:$SIP_PORT"]
admin: { listen: "127.0.0.1:$ADMIN_PORT" }
log: { level: info, file: "$WORK/sipedge.log" }
b2bua: { drain_timeout_secs: 10 }
trunks:
  - { name: sipp, trunk_group: sipp-trunks, sources: ["127.0.0.1/32"] }
gateway:
  groups:
    - name: carrier-a
      transport: $TRANSPORT
      destinations:
        - { uri: "$GW_URI", address: "127.0.0.1:$UAS_PORT" }
lcr:
  static_routes:
    - prefix: ""
      routes:
        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }
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
log "sipedge pid $SIPEDGE_PID ready: SIP $TRANSPORT 127.0.0.1:$SIP_PORT, admin 127.0.0.1:$ADMIN_PORT"

# --- SIPp UAS --------------------------------------------------------------
(cd "$WORK" && exec "$SIPP" -sn uas -t "$SIPP_T" -i 127.0.0.1 -p "$UAS_PORT" \
	-mi 127.0.0.1 -mp "$UAS_MP" -cp "$UAS_CP" -nostdin \
	-trace_err -error_file "$WORK/uas_errors.log" \
	-trace_screen -screen_file "$WORK/uas_screen.log" \
	>"$WORK/uas.out" 2>&1) &
UAS_PID=$!
# Wait until the UAS listens on its port.
for ((i = 0; i < 50; i++)); do
	kill -0 "$UAS_PID" 2>/dev/null || fail "SIPp UAS exited: $(tail -5 "$WORK/uas.out")"
	if [ "$TRANSPORT" = tcp ]; then
		ss -Hltn "sport = :$UAS_PORT" 2>/dev/null | grep -q . && break
	else
		ss -Hlun "sport = :$UAS_PORT" 2>/dev/null | grep -q . && break
	fi
	sleep 0.1
done

# --- CPU sample ------------------------------------------------------------
CLK_TCK=$(getconf CLK_TCK)
# cpu_ticks PID: utime+stime (fields 14 and 15; the comm field may hold
# spaces, so count from after its closing parenthesis).
cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	awk '{print $12 + $13}' <<<"$s"
}
CPU0=$(cpu_ticks "$SIPEDGE_PID") || fail "cannot read /proc/$SIPEDGE_PID/stat"

# --- SIPp UAC --------------------------------------------------------------
log "SIPp UAC: $CALLS calls at $RATE/s over $TRANSPORT (limit $LIMIT simultaneous, timeout ${UAC_TIMEOUT}s)"
T0=$(date +%s.%N)
(cd "$WORK" && exec timeout -s TERM -k 5 $((UAC_TIMEOUT + 5)) \
	"$SIPP" -sn uac "127.0.0.1:$SIP_PORT" -t "$SIPP_T" -i 127.0.0.1 -p "$UAC_PORT" \
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
CPU1=$(cpu_ticks "$SIPEDGE_PID") || fail "sipedge died during the run: $(tail -5 "$WORK/sipedge.out" "$WORK/sipedge.log" 2>/dev/null)"

# --- stop everything, flush CDRs --------------------------------------------
stop "$UAS_PID" 5
UAS_PID=
stop "$SIPEDGE_PID" 40
SIPEDGE_PID=

# --- SIPp statistics ---------------------------------------------------------
# The last line of the statistics CSV holds the final cumulative counters.
stat() {
	awk -F';' -v col="$1" '
		NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
		{ last = $c }
		END { if (c == "" || last == "") print "?"; else print last + 0 }
	' "$WORK/uac_stat.csv" 2>/dev/null || echo "?"
}
ATTEMPTED=$(stat 'TotalCallCreated')
SUCCEEDED=$(stat 'SuccessfulCall(C)')
FAILED=$(stat 'FailedCall(C)')
RETRANS=$(stat 'Retransmissions(C)')
OUTOFCALL=$(stat 'OutOfCallMsgs(C)')
# The non-zero Failed*(C) counters, e.g. "FailedMaxUDPRetrans=3".
FAIL_REASONS=$(awk -F';' '
	NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; next }
	{ for (i = 1; i <= NF; i++) v[i] = $i }
	END {
		for (i = 1; i in h; i++)
			if (h[i] ~ /^Failed.+\(C\)$/ && h[i] != "FailedCall(C)" && v[i] + 0 > 0) {
				n = h[i]; sub(/\(C\)$/, "", n); out = out " " n "=" v[i] + 0
			}
		print out == "" ? " none" : out
	}' "$WORK/uac_stat.csv" 2>/dev/null)

CDRS=0
CDR200=0
if [ -f "$WORK/cdr.jsonl" ]; then
	CDRS=$(grep -c . "$WORK/cdr.jsonl")
	CDR200=$(grep -c '"final_code": *200[,}]' "$WORK/cdr.jsonl")
fi

ELAPSED=$(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.2f", b - a }')
CPU_TICKS=$((CPU1 - CPU0))
CPU_MS=$(awk -v t="$CPU_TICKS" -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", t * 1000 / hz }')
if [[ $ATTEMPTED =~ ^[0-9]+$ ]] && [ "$ATTEMPTED" -gt 0 ]; then
	US_PER_CALL=$(awk -v t="$CPU_TICKS" -v hz="$CLK_TCK" -v n="$ATTEMPTED" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')
	ACHIEVED=$(awk -v n="$ATTEMPTED" -v s="$ELAPSED" 'BEGIN { printf "%.0f", n / s }')
	RATIO=$(awk -v ok="$SUCCEEDED" -v n="$ATTEMPTED" 'BEGIN { printf "%.2f%%", ok * 100 / n }')
else
	US_PER_CALL="?" ACHIEVED="?" RATIO="?"
fi

cat <<EOF
sipedge SIPp e2e: $TRANSPORT, $RATE calls/s for ${DURATION}s ($CALLS calls), SIPp UAC exit $UAC_RC
  calls attempted:    $ATTEMPTED (in ${ELAPSED}s, ~$ACHIEVED calls/s)
  calls succeeded:    $SUCCEEDED ($RATIO)
  calls failed:       $FAILED (reasons:${FAIL_REASONS:- ?}; out-of-call messages $OUTOFCALL)
  retransmissions:    $RETRANS
  CDR lines:          $CDRS ($CDR200 with final_code 200)
  sipedge CPU:        ${CPU_MS} ms ($CPU_TICKS ticks at $CLK_TCK Hz) = $US_PER_CALL us/call
EOF

# --- verdict -----------------------------------------------------------------
bad=0
if ! [[ $ATTEMPTED =~ ^[0-9]+$ && $SUCCEEDED =~ ^[0-9]+$ && $FAILED =~ ^[0-9]+$ ]]; then
	log "cannot read SIPp statistics from $WORK/uac_stat.csv"
	tail -20 "$WORK/uac.out" >&2
	bad=1
else
	[ "$FAILED" -eq 0 ] || { log "FAIL: $FAILED calls failed"; bad=1; }
	[ "$SUCCEEDED" -eq "$ATTEMPTED" ] || { log "FAIL: $SUCCEEDED of $ATTEMPTED calls succeeded"; bad=1; }
	[ "$ATTEMPTED" -gt 0 ] || { log "FAIL: no call attempted"; bad=1; }
	[ "$CDRS" -eq "$ATTEMPTED" ] || { log "FAIL: $CDRS CDR lines for $ATTEMPTED calls"; bad=1; }
	[ "$CDR200" -eq "$SUCCEEDED" ] || { log "FAIL: $CDR200 CDRs with final_code 200 for $SUCCEEDED successful calls"; bad=1; }
fi
if [ "$UAC_RC" -ne 0 ] && [ "$bad" = 0 ]; then
	log "FAIL: SIPp UAC exit status $UAC_RC"
	tail -20 "$WORK/uac.out" >&2
	bad=1
fi
if [ "$bad" != 0 ]; then
	[ -s "$WORK/uac_errors.log" ] && { log "first SIPp UAC errors:"; head -40 "$WORK/uac_errors.log" >&2; }
	grep -E 'level=(WARN|ERROR)' "$WORK/sipedge.log" 2>/dev/null | head -20 >&2
	exit 1
fi
OK=1
exit 0
