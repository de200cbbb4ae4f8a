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
# success unless KEEP=1. The shared machinery is in lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# usage: print the usage line and exit 2.
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

CALLS=$((RATE * DURATION))
LIMIT=$((RATE * 4 > 200 ? RATE * 4 : 200)) # simultaneous calls cap for the UAC
UAC_TIMEOUT=$((DURATION + 30))
SIPP_LOGS="uac uas"

# cpu_ticks PID: utime+stime (fields 14 and 15; the comm field may hold
# spaces, so count from after its closing parenthesis).
cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	awk '{print $12 + $13}' <<<"$s"
}

# fail_reasons: the non-zero Failed*(C) counters of the UAC, e.g. " FailedMaxUDPRetrans=3".
fail_reasons() {
	awk -F';' '
		NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; next }
		{ for (i = 1; i <= NF; i++) v[i] = $i }
		END {
			for (i = 1; i in h; i++)
				if (h[i] ~ /^Failed.+\(C\)$/ && h[i] != "FailedCall(C)" && v[i] + 0 > 0) {
					n = h[i]; sub(/\(C\)$/, "", n); out = out " " n "=" v[i] + 0
				}
			print out == "" ? " none" : out
		}' "$WORK/uac_stat.csv" 2>/dev/null || true
}

# dump_errors: on failure, show the first SIPp UAC errors (called by finish).
dump_errors() {
	if [ -s "$WORK/uac_errors.log" ]; then
		log "first SIPp UAC errors:"
		head -40 "$WORK/uac_errors.log" >&2
	fi
}

setup_work sipedge-sipp
pick 1 SIP_PORT UAS_PORT UAC_PORT ADMIN_PORT UAS_CP UAC_CP # SIPp's -cp: a control socket
pick 4 UAS_MP UAC_MP                                       # SIPp's -mp: RTP echo sockets, +2
build_sipedge
GW_URI="sip:127.0.0.1:$UAS_PORT"
[ "$TRANSPORT" = tcp ] && GW_URI+=";transport=tcp"
write_config <<EOF
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
EOF
start_sipedge
start_uas uas "$UAS_PORT" "$UAS_CP" "$UAS_MP" -sn uas

CLK_TCK=$(getconf CLK_TCK)
CPU0=$(cpu_ticks "$SIPEDGE_PID") || fail "cannot read /proc/$SIPEDGE_PID/stat"
log "SIPp UAC: $CALLS calls at $RATE/s over $TRANSPORT (limit $LIMIT simultaneous, timeout ${UAC_TIMEOUT}s)"
run_uac
CPU1=$(cpu_ticks "$SIPEDGE_PID") || fail "sipedge died during the run: $(tail -5 "$WORK/sipedge.out" "$WORK/sipedge.log" 2>/dev/null)"
stop_uas
stop_sipedge # flushes the CDRs

# --- report ------------------------------------------------------------------
read_uac_stats
RETRANS=$(sipp_stat "$WORK/uac_stat.csv" 'Retransmissions(C)')
OUTOFCALL=$(sipp_stat "$WORK/uac_stat.csv" 'OutOfCallMsgs(C)')
FAIL_REASONS=$(fail_reasons)
CDRS=$(cdr_count .)
CDR200=$(cdr_count '"final_code": *200[,}]')

CPU_TICKS=$((CPU1 - CPU0))
CPU_MS=$(awk -v t="$CPU_TICKS" -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", t * 1000 / hz }')
if num "$ATTEMPTED" && [ "$ATTEMPTED" -gt 0 ]; then
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
if ! num "$ATTEMPTED" || ! num "$SUCCEEDED" || ! num "$FAILED"; then
	log "cannot read SIPp statistics from $WORK/uac_stat.csv"
	tail -20 "$WORK/uac.out" >&2 || true
	bad=1
else
	[ "$FAILED" -eq 0 ] || { log "FAIL: $FAILED calls failed"; bad=1; }
	[ "$SUCCEEDED" -eq "$ATTEMPTED" ] || { log "FAIL: $SUCCEEDED of $ATTEMPTED calls succeeded"; bad=1; }
	[ "$ATTEMPTED" -gt 0 ] || { log "FAIL: no call attempted"; bad=1; }
	[ "$CDRS" -eq "$ATTEMPTED" ] || { log "FAIL: $CDRS CDR lines for $ATTEMPTED calls"; bad=1; }
	[ "$CDR200" -eq "$SUCCEEDED" ] || { log "FAIL: $CDR200 CDRs with final_code 200 for $SUCCEEDED successful calls"; bad=1; }
fi
finish "$bad"
