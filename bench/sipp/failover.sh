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
# on failure, removed on success unless KEEP=1. Free ports, readiness via
# /readyz, the cleanup trap and the SIPp/CDR readers are shared with run.sh
# in lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

udp_calls 50 "$@"
SIPP_LOGS="uac uas_a uas_b"

# carrier NAME PORT CP MP SCENARIO...: a UAS that exits by itself after CALLS calls (-m), writing its statistics.
carrier() {
	start_uas "uas_$1" "$2" "$3" "$4" "${@:5}" -m "$CALLS" -trace_stat -stf "$WORK/uas_$1_stat.csv" -fd 1
}

# dump_errors: on failure, show the SIPp error traces and non-200 CDRs (called by finish).
dump_errors() { dump_sipp_errors; }

setup_work sipedge-sipp-failover
pick 1 SIP_PORT ADMIN_PORT UAS_A_PORT UAS_B_PORT UAC_PORT UAS_A_CP UAS_B_CP UAC_CP # SIPp's -cp: a control socket
pick 4 UAS_A_MP UAS_B_MP UAC_MP                                                      # SIPp's -mp: RTP echo sockets, +2
build_sipedge
write_config <<EOF
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
EOF
start_sipedge
carrier a "$UAS_A_PORT" "$UAS_A_CP" "$UAS_A_MP" -sf "$HERE/uas_503.xml"
carrier b "$UAS_B_PORT" "$UAS_B_CP" "$UAS_B_MP" -sn uas

log "SIPp UAC: $CALLS calls at $RATE/s (carrier-a answers 503, carrier-b answers)"
run_uac
# The carriers have seen every call by now; give them a moment to finish
# their last calls (-m) and exit on their own, then stop what is left.
wait_uas
kill -0 "$SIPEDGE_PID" 2>/dev/null || fail "sipedge died during the run: $(tail -5 "$WORK/sipedge.out" "$WORK/sipedge.log" 2>/dev/null)"
stop_sipedge # flushes the CDRs

# --- report ------------------------------------------------------------------
read_uac_stats
A_INVITES=$(sipp_stat "$WORK/uas_a_stat.csv" 'TotalCallCreated')
A_DONE=$(sipp_stat "$WORK/uas_a_stat.csv" 'SuccessfulCall(C)')
B_INVITES=$(sipp_stat "$WORK/uas_b_stat.csv" 'TotalCallCreated')
B_DONE=$(sipp_stat "$WORK/uas_b_stat.csv" 'SuccessfulCall(C)')

# CDR lines, and those showing the failover: answered by carrier-b after a
# dialled 503 attempt on carrier-a. sipedge writes compact JSON with a
# fixed field order, so plain regular expressions suffice.
RE_200='"final_code":200[,}]'
RE_B='"carrier_id":"carrier-b","rate":'
RE_A503='"lcr_attempts":\[[^]]*\{"carrier_id":"carrier-a","status":503,"elapsed_ms":[0-9]+,"dialed":true[,}]'
CDRS=$(cdr_count .)
CDR200=$(cdr_count "$RE_200")
CDRB=$(cdr_count "$RE_B")
CDRFAILOVER=$(cdr_count "$RE_A503")
CDRGOOD=$(cdr_count "$RE_200" "$RE_B" "$RE_A503")

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
if ! num "$ATTEMPTED" || ! num "$SUCCEEDED" || ! num "$FAILED" || ! num "$A_INVITES" || ! num "$B_INVITES"; then
	log "FAIL: cannot read SIPp statistics (uac_stat.csv, uas_a_stat.csv, uas_b_stat.csv)"
	tail -20 "$WORK/uac.out" >&2 || true
	bad=1
else
	all_calls_ok || bad=1
	[ "$A_INVITES" -eq "$CALLS" ] || { log "FAIL: carrier-a (503) received $A_INVITES INVITEs, want $CALLS"; bad=1; }
	[ "$B_INVITES" -eq "$CALLS" ] || { log "FAIL: carrier-b received $B_INVITES INVITEs, want $CALLS"; bad=1; }
	[ "$CDRS" -eq "$CALLS" ] || { log "FAIL: $CDRS CDR lines for $CALLS calls"; bad=1; }
	[ "$CDRGOOD" -eq "$CALLS" ] || {
		log "FAIL: $CDRGOOD of $CALLS CDRs have final_code 200, carrier_id carrier-b and a dialed 503 attempt on carrier-a"
		bad=1
	}
fi
finish "$bad"
