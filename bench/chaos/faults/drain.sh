# The drain faults; sourced by faults.sh. A caller (uac_hold.xml) places
# DRAIN_RATE calls/s for DRAIN_LOAD_SECS seconds and holds each call until
# the network ends it; the carrier answers and holds them too. DRAIN_AT
# seconds in, sipedge gets SIGTERM: calls that come after are refused
# (503), and those still up at b2bua.drain_timeout_secs (DRAIN_TIMEOUT)
# are ended by sipedge, BYE on both legs. About DRAIN_RATE * DRAIN_AT calls
# are up then: their BYEs leave in one burst, and SIPp, starved of CPU on
# a busy machine, loses those its socket buffer cannot hold (a datagram
# takes 1-2 KiB of a 208 KiB buffer) unless sipedge retransmits them,
# which drain-bye-lost checks.

DRAIN_RATE=${DRAIN_RATE:-30}
DRAIN_LOAD_SECS=${DRAIN_LOAD_SECS:-4}
DRAIN_AT=${DRAIN_AT:-2}
DRAIN_TIMEOUT=${DRAIN_TIMEOUT:-3}
DRAIN_EXIT_SECS=${DRAIN_EXIT_SECS:-5}
TWICE_DRAIN_TIMEOUT=${TWICE_DRAIN_TIMEOUT:-12} # below the caller's 20 s hold
TWICE_EXIT_SECS=${TWICE_EXIT_SECS:-3}
BYE_AUTH_DELAY_MS=${BYE_AUTH_DELAY_MS:-700}

# drain_setup SCENARIO AUTH [SIPP_ARGS...]: the carrier (SCENARIO, with a
# message trace) and sipedge routing to it, drain_timeout_secs DRAIN_SECS;
# AUTH is the group's auth setting, if any.
drain_setup() {
	local scen=$1 auth=$2
	shift 2
	carrier a "$scen" -trace_msg -message_file "$WORK/a_messages.log" "$@"
	sipedge_config <<-EOF
		gateway:
		  groups:
		    - name: carrier-a
		      $auth
		      destinations:
		        - { uri: "sip:127.0.0.1:$A_PORT", address: "127.0.0.1:$A_PORT" }
		lcr:
		  static_routes:
		    - prefix: ""
		      routes:
		        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }
	EOF
	sipedge_up
}

# drain_run: the load, SIGTERM at DRAIN_AT, sipedge's exit (sipedge_wait
# up to GRACE, default 40 s), the caller's end; sets UP (calls answered)
# and the caller's figures.
drain_run() {
	local t0
	caller_start caller uac_hold.xml $((DRAIN_RATE * DRAIN_LOAD_SECS)) "$DRAIN_RATE"
	sleep "$DRAIN_AT"
	t0=$(now)
	kill -TERM "$SIPEDGE_PID"
	sipedge_wait "${1:-40}" "$t0"
	caller_wait caller
}

# drain_common: what every drain fault expects of the calls sipedge
# answered: each ended by a BYE on the caller's leg and has a CDR; the
# calls after SIGTERM refused.
drain_common() {
	local byes_a cdr_answered refused_cdrs
	byes_a=$(counts caller '^[0-9]+_BYE_Recv$')
	cdr_answered=$(cdr_by time_answer - | awk -v n="$(cdrs)" '{ print n - $1 }')
	refused_cdrs=$(cdrs '"final_code":503')
	note "$ANSWERED calls up when sipedge drained, $REFUSED refused; caller got $byes_a BYEs; $(cdrs) CDRs ($cdr_answered of answered calls, $refused_cdrs with 503); sipedge exited ${SIPEDGE_STOP_SECS}s after the (last) SIGTERM, status $SIPEDGE_RC"
	expect "calls up at the drain timeout: the caller got a BYE for each ($byes_a of $ANSWERED)" '[ "$byes_a" = "$ANSWERED" ] && [ "$ANSWERED" -gt 0 ]'
	expect "calls after SIGTERM refused ($REFUSED)" '[ "$REFUSED" -gt 0 ]'
	expect "every answered call has a CDR ($cdr_answered of $ANSWERED)" '[ "$cdr_answered" = "$ANSWERED" ]'
}

fault_drain_timeout() {
	DRAIN_SECS=$DRAIN_TIMEOUT
	gate '^$'
	drain_setup "$WORK/uas_gate.xml" "" -set hole_from 0 -set hole_until 0
	drain_run
	drain_common
	local byes_b
	# From the message trace: SIPp's own counts miss the BYE of a call its
	# state machine aborted (a retransmitted INVITE it failed to absorb
	# when it stalled), which sipedge still ended.
	byes_b=$("$PYTHON" "$CHAOS/byetrace.py" "$WORK/a_messages.log" | sed -E 's/^calls=([0-9]+).*/\1/')
	note "carrier got a BYE for $byes_b calls"
	expect "calls up at the drain timeout: the carrier got a BYE for each ($byes_b of $ANSWERED)" '[ "$byes_b" = "$ANSWERED" ]'
	expect "sipedge exited within drain_timeout_secs + $DRAIN_EXIT_SECS s (${SIPEDGE_STOP_SECS}s)" \
		'awk -v s="$SIPEDGE_STOP_SECS" -v m=$((DRAIN_TIMEOUT + DRAIN_EXIT_SECS)) "BEGIN { exit !(s <= m) }"'
}

fault_drain_bye_lost() {
	DRAIN_SECS=$DRAIN_TIMEOUT
	drain_setup "$CHAOS/uas_bye_lost.xml" ""
	drain_run
	drain_common
	local calls retrans answered
	read -r calls retrans answered < <("$PYTHON" "$CHAOS/byetrace.py" "$WORK/a_messages.log" --before "$SIPEDGE_EXIT_AT" |
		sed -E 's/[a-z]+=//g')
	note "carrier legs: $calls got a BYE, $retrans a retransmitted one, $answered answered it before sipedge exited"
	expect "every carrier leg got its BYE ($calls of $ANSWERED)" '[ "$calls" = "$ANSWERED" ]'
	expect "the first BYE lost: every carrier leg got it retransmitted ($retrans of $calls)" '[ "$retrans" = "$calls" ]'
	expect "every carrier leg's BYE answered before sipedge exited ($answered of $calls)" '[ "$answered" = "$calls" ]'
}

fault_drain_bye_auth() {
	DRAIN_SECS=$DRAIN_TIMEOUT
	# bench/sipp/uas_auth.xml, its challenge to the BYE sent BYE_AUTH_DELAY_MS
	# after the BYE: a challenge that comes while sipedge is still sending
	# its BYEs is answered by chance; one that comes later must be waited
	# for.
	"$PYTHON" - "$REPO/bench/sipp/uas_auth.xml" "$WORK/uas_auth.xml" "$BYE_AUTH_DELAY_MS" <<-'PY' ||
		import sys
		src, dst, ms = sys.argv[1:]
		s = open(src).read()
		bye = '<recv request="BYE">\n  </recv>\n'
		if s.count(bye) != 1:
		    sys.exit("no single bare BYE recv in " + src)
		open(dst, "w").write(s.replace(bye, bye + '  <pause milliseconds="%s"/>\n' % ms))
	PY
		fail "cannot delay the carrier's challenge to the BYE"
	drain_setup "$WORK/uas_auth.xml" "auth: { username: acct-42, password: s3cret }"
	drain_run
	drain_common
	local bye1 bye2
	bye1=$(counts a '^[0-9]+_BYE_Recv$')
	bye2=$(awk -F';' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+_BYE_Recv$/) c[++n] = i; next }
		{ v = $c[2] } END { print v + 0 }' "$(counts_file a)")
	note "carrier: $bye1 BYEs challenged, $bye2 came again with credentials"
	expect "every carrier leg's challenged BYE came again with credentials before sipedge exited ($bye2 of $ANSWERED)" \
		'[ "$bye1" = "$ANSWERED" ] && [ "$bye2" = "$ANSWERED" ]'
}

fault_drain_sigterm_twice() {
	DRAIN_SECS=$TWICE_DRAIN_TIMEOUT
	CHECK_STOP=0
	gate '^$'
	drain_setup "$WORK/uas_gate.xml" "" -set hole_from 0 -set hole_until 0
	local t1
	caller_start caller uac_hold.xml $((DRAIN_RATE * DRAIN_LOAD_SECS)) "$DRAIN_RATE"
	sleep "$DRAIN_AT"
	kill -TERM "$SIPEDGE_PID"
	sleep 1
	t1=$(now)
	kill -TERM "$SIPEDGE_PID"
	sipedge_wait 40 "$t1"
	caller_wait caller
	drain_common
	expect "a second SIGTERM stops sipedge at once: exit within $TWICE_EXIT_SECS s (${SIPEDGE_STOP_SECS}s; drain_timeout_secs $TWICE_DRAIN_TIMEOUT)" \
		'awk -v s="$SIPEDGE_STOP_SECS" -v m="$TWICE_EXIT_SECS" "BEGIN { exit !(s <= m) }"'
}
