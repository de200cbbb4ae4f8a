#!/usr/bin/env bash
# SIPp carrier Digest authentication through sipedge on loopback.
#
#   bench/sipp/auth.sh [CALLS [RATE]]      (default 20 calls at 10 calls/s)
#
# A SIPp UAS plays a carrier that demands authentication
# (bench/sipp/uas_auth.xml): it answers each call's first INVITE 401 with a
# per-call Digest challenge (realm carrier.example, qop auth, MD5), checks
# the credentials of the INVITE sipedge sends again with SIPp's verifyauth
# (user acct-42, password s3cret), and answers it if they are right, 403
# and a failed call if not; the ACK for its 200 must repeat the
# Authorization (RFC 3261 13.2.2.4), or the call fails. The BYE sipedge
# sends it when the caller hangs up is challenged the same way: it must
# come again with credentials for BYE, or the call fails (a carrier would
# keep it up and bill it). The challenge is a 401 with WWW-Authenticate,
# not a 407: SIPp 3.6.1's verifyauth reads the Authorization header only,
# never Proxy-Authorization. sipedge routes "" to the gateway group
# carrier-b, whose auth account is acct-42 with password AUTH_PASSWORD
# (default s3cret; run with another to see the script fail). A SIPp UAC
# (-sn uac) places CALLS calls at RATE calls/s over UDP.
#
# Exit status is non-zero unless: every UAC call succeeded; the carrier
# completed every call and received two INVITEs per call (from SIPp's
# -trace_counts) and two BYEs; sipedge wrote one CDR per call, each with
# final_code 200 and an empty lcr_attempts; and sipedge's
# sipedge_carrier_auth_challenges_total{result="answered"}, summed over its
# shards and read from /metrics before it stops, equals twice CALLS (each
# call's INVITE and BYE).
# Temporary files live in one mktemp directory: kept (and its path printed)
# on failure, removed on success unless KEEP=1. The shared machinery is in
# lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

udp_calls 20 "$@"
AUTH_PASSWORD=${AUTH_PASSWORD:-s3cret}
SIPP_LOGS="uac uas"

# auth_metric RESULT: sipedge_carrier_auth_challenges_total{result=RESULT} summed over shards, from WORK/metrics.txt.
auth_metric() {
	awk -v re="^sipedge_carrier_auth_challenges_total[{].*result=\"$1\"" '
		$0 ~ re { n += $NF; seen = 1 }
		END { if (seen) print n + 0; else print "?" }
	' "$WORK/metrics.txt" 2>/dev/null || echo "?"
}

# uas_received METHOD: the final counts of the carrier's receptions of
# METHOD (INVITE or BYE) from its -trace_counts CSV (columns
# N_METHOD_Recv, N the message index), the challenged request's and the
# one with credentials, or "? ?".
uas_received() {
	local f
	for f in "$WORK"/uas_auth_*_counts.csv; do
		[ -f "$f" ] || break
		awk -F';' -v method="$1" '
			NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ ("^[0-9]+_" method "_Recv$")) c[++n] = i; next }
			{ for (j = 1; j <= n; j++) v[j] = $c[j] }
			END { if (n == 2 && NR > 1) print v[1] + 0, v[2] + 0; else print "? ?" }
		' "$f"
		return 0
	done
	echo "? ?"
}

# dump_errors: on failure, show the SIPp error traces and non-200 CDRs (called by finish).
dump_errors() { dump_sipp_errors; }

setup_work sipedge-sipp-auth
pick 1 SIP_PORT ADMIN_PORT UAS_PORT UAC_PORT UAS_CP UAC_CP # SIPp's -cp: a control socket
pick 4 UAS_MP UAC_MP                                        # SIPp's -mp: RTP echo sockets, +2
build_sipedge
write_config <<EOF
gateway:
  groups:
    - name: carrier-b
      auth: { username: acct-42, password: "$AUTH_PASSWORD" }
      destinations:
        - { uri: "sip:127.0.0.1:$UAS_PORT", address: "127.0.0.1:$UAS_PORT" }
lcr:
  static_routes:
    - prefix: ""
      routes:
        - { carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005 }
EOF
start_sipedge
# The carrier exits by itself after CALLS calls (-m); -trace_counts writes
# its per-message counts to WORK/uas_auth_PID_counts.csv.
start_uas uas "$UAS_PORT" "$UAS_CP" "$UAS_MP" -sf "$HERE/uas_auth.xml" -m "$CALLS" \
	-trace_stat -stf "$WORK/uas_stat.csv" -fd 1 -trace_counts

log "SIPp UAC: $CALLS calls at $RATE/s (the carrier challenges each INVITE and BYE with a 401)"
run_uac
# The carrier has seen every call by now; give it a moment to finish its
# last calls (-m) and exit on its own, then stop it if it did not.
wait_uas
kill -0 "$SIPEDGE_PID" 2>/dev/null || fail "sipedge died during the run: $(tail -5 "$WORK/sipedge.out" "$WORK/sipedge.log" 2>/dev/null)"
curl -fsS --max-time 5 -o "$WORK/metrics.txt" "http://127.0.0.1:$ADMIN_PORT/metrics" || log "cannot read /metrics"
stop_sipedge # flushes the CDRs

# --- report ------------------------------------------------------------------
read_uac_stats
UAS_CALLS=$(sipp_stat "$WORK/uas_stat.csv" 'TotalCallCreated')
UAS_DONE=$(sipp_stat "$WORK/uas_stat.csv" 'SuccessfulCall(C)')
UAS_FAILED=$(sipp_stat "$WORK/uas_stat.csv" 'FailedCall(C)')
read -r INVITES1 INVITES2 < <(uas_received INVITE)
read -r BYES1 BYES2 < <(uas_received BYE)
ANSWERED=$(auth_metric answered)
REFUSED=$(auth_metric refused)
NOCREDS=$(auth_metric no_credentials)
UNANSWERABLE=$(auth_metric unanswerable)

# sipedge writes compact JSON with a fixed field order, so plain regular
# expressions suffice.
RE_200='"final_code":200[,}]'
RE_NOATTEMPT='"lcr_attempts":\[\]'
CDRS=$(cdr_count .)
CDR200=$(cdr_count "$RE_200")
CDRGOOD=$(cdr_count "$RE_200" "$RE_NOATTEMPT")

cat <<EOF
sipedge SIPp carrier auth: $CALLS calls at $RATE/s over udp, the carrier challenges each INVITE and BYE with a Digest 401; UAC exit $UAC_RC
  UAC calls:          $ATTEMPTED attempted, $SUCCEEDED succeeded, $FAILED failed (in ${ELAPSED}s)
  carrier (auth):     $UAS_CALLS calls, $UAS_DONE completed, $UAS_FAILED failed; INVITEs: $INVITES1 challenged, $INVITES2 with credentials; BYEs: $BYES1 challenged, $BYES2 with credentials
  sipedge challenges: $ANSWERED answered, $REFUSED refused, $NOCREDS no_credentials, $UNANSWERABLE unanswerable
  CDR lines:          $CDRS: $CDR200 final_code 200, $CDRGOOD with final_code 200 and no lcr_attempts
EOF
[ -s "$WORK/cdr.jsonl" ] && { echo "  first CDR:"; head -1 "$WORK/cdr.jsonl" | sed 's/^/    /'; }

# --- verdict -----------------------------------------------------------------
bad=0
if ! num "$ATTEMPTED" || ! num "$SUCCEEDED" || ! num "$FAILED" || ! num "$UAS_DONE" || ! num "$INVITES1" || ! num "$INVITES2" ||
	! num "$BYES1" || ! num "$BYES2"; then
	log "FAIL: cannot read SIPp statistics (uac_stat.csv, uas_stat.csv, uas_auth_*_counts.csv)"
	tail -20 "$WORK/uac.out" >&2 || true
	bad=1
else
	all_calls_ok || bad=1
	[ "$UAS_DONE" -eq "$CALLS" ] || { log "FAIL: the carrier completed $UAS_DONE of $CALLS calls"; bad=1; }
	if [ "$INVITES1" -ne "$CALLS" ] || [ "$INVITES2" -ne "$CALLS" ]; then
		log "FAIL: the carrier received $INVITES1 first and $INVITES2 second INVITEs, want $CALLS of each"
		bad=1
	fi
	if [ "$BYES1" -ne "$CALLS" ] || [ "$BYES2" -ne "$CALLS" ]; then
		log "FAIL: the carrier received $BYES1 first and $BYES2 second BYEs, want $CALLS of each"
		bad=1
	fi
	[ "$CDRS" -eq "$CALLS" ] || { log "FAIL: $CDRS CDR lines for $CALLS calls"; bad=1; }
	[ "$CDRGOOD" -eq "$CALLS" ] || { log "FAIL: $CDRGOOD of $CALLS CDRs have final_code 200 and no lcr_attempts"; bad=1; }
fi
[ "$ANSWERED" = "$((2 * CALLS))" ] || { log "FAIL: sipedge answered $ANSWERED challenges, want $((2 * CALLS)) (each call's INVITE and BYE)"; bad=1; }
finish "$bad"
