# The carrier faults; sourced by faults.sh. The carriers are SIPp UAS
# (uas_gate.xml, uas_late.xml); sipedge routes by its static table.

# carrier-blackhole: carrier-a (first, timeout_secs 1: no progress within
# a second fails over) and carrier-b. carrier-a answers, then swallows
# every INVITE for HOLE_SECS seconds from HOLE_AT seconds in, then answers
# again; a caller places HOLE_RATE calls/s for HOLE_RUN_SECS seconds.
# Expected: every call answered (by carrier-b while carrier-a is dark),
# none waiting past 1 s + HOLE_MARGIN_MS; carrier-a taken out within
# HOLE_OUT_SECS of the hole's start (no call dialled to it fails after
# that) and back once the hole is over (down_secs HOLE_DOWN_SECS): it
# answers calls again in the run's last seconds.
HOLE_RATE=${HOLE_RATE:-50}
HOLE_RUN_SECS=${HOLE_RUN_SECS:-16}
HOLE_AT=${HOLE_AT:-3}
HOLE_SECS=${HOLE_SECS:-3}
HOLE_OUT_SECS=${HOLE_OUT_SECS:-2}
HOLE_DOWN_SECS=${HOLE_DOWN_SECS:-5}
HOLE_MARGIN_MS=${HOLE_MARGIN_MS:-1000}

# carrier-late: carrier-a rings at once and answers only after sipedge's
# CANCEL (uas_late.xml: its 200 crosses the CANCEL); its route fails over
# after LATE_RING_SECS seconds even after the 180 (reroute_after_progress)
# to carrier-b. A caller places LATE_RATE calls/s for LATE_SECS seconds.
# Expected: every call answered by carrier-b, and every late 200 of
# carrier-a ACKed and ended with a BYE (SIPp counts a call complete only
# then).
LATE_RATE=${LATE_RATE:-20}
LATE_SECS=${LATE_SECS:-8}
LATE_RING_SECS=${LATE_RING_SECS:-1}

# carrier-lost-invites: one carrier, answering everything but some INVITEs,
# which it swallows as a host dropping UDP under load would: a burst of
# LOSS_BURST in a row a quarter into the run (20 ms at 1,000 calls/s) and
# LOSS_SCATTERED more, one at a time, in the second half. A caller places
# LOSS_RATE calls/s for LOSS_SECS seconds; the route gives up on a carrier
# that shows no progress within 5 s (a shorter deadline turns the
# machine's own stalls at this rate, SIPp's above all, into no-answers).
# Expected: the carrier stays up: no call is refused without a dial, and
# only the calls the carrier did not answer fail (the lost ones, and those
# a stalled SIPp did not answer in time: at this rate on a busy machine it
# stalls for a second now and then), others at most LOSS_TOLERANCE_PERMILLE
# per mille of the calls (a sanity bound on everything else). The lost
# INVITEs must show as calls dialled and not answered. A burst, not three
# in a row: a counter of consecutive failures sees three lost INVITEs only
# when their deadlines fall due in one tick of one shard's timer wheel
# with no answer reported between them, which a burst makes all but
# certain.
LOSS_RATE=${LOSS_RATE:-1000}
LOSS_SECS=${LOSS_SECS:-20}
LOSS_BURST=${LOSS_BURST:-20}
LOSS_SCATTERED=${LOSS_SCATTERED:-6}
LOSS_TOLERANCE_PERMILLE=${LOSS_TOLERANCE_PERMILLE:-5}

# gate LOST_REGEX: WORK/uas_gate.xml, uas_gate.xml losing the INVITEs of
# the calls whose number matches LOST_REGEX.
gate() { sed "s/@LOST@/$1/" "$CHAOS/uas_gate.xml" >"$WORK/uas_gate.xml"; }

fault_carrier_blackhole() {
	local calls t0 from until
	calls=$((HOLE_RATE * HOLE_RUN_SECS))
	gate '^$'
	t0=$(date +%s)
	from=$((t0 + 2 + HOLE_AT)) # sipedge and the caller start within 2 s
	until=$((from + HOLE_SECS))
	carrier a "$WORK/uas_gate.xml" -set hole_from "$from" -set hole_until "$until"
	carrier b uas
	sipedge_config <<-EOF
		gateway:
		  groups:
		    - name: carrier-a
		      passive: { down_secs: $HOLE_DOWN_SECS }
		      destinations:
		        - { uri: "sip:127.0.0.1:$A_PORT", address: "127.0.0.1:$A_PORT" }
		    - name: carrier-b
		      destinations:
		        - { uri: "sip:127.0.0.1:$B_PORT", address: "127.0.0.1:$B_PORT" }
		lcr:
		  static_routes:
		    - prefix: ""
		      routes:
		        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, timeout_secs: 1 }
		        - { carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005 }
	EOF
	sipedge_up
	while [ "$(date +%s)" -lt $((from - HOLE_AT)) ]; do sleep 0.1; done
	caller_start caller uac_call.xml "$calls" "$HOLE_RATE"
	caller_wait caller
	scrape metrics_end.txt
	sipedge_down
	local lost_in_hole lost_late a_after a_total downs
	# Calls whose attempt on carrier-a failed (no answer: 408), by when their INVITE came.
	lost_in_hole=$(cdr_by attempt carrier-a/408/dialed --after "$from" --before "$((from + HOLE_OUT_SECS))")
	lost_late=$(cdr_by attempt carrier-a/408/dialed --after "$((from + HOLE_OUT_SECS))")
	a_after=$(cdr_by carrier_id carrier-a --after "$((until + HOLE_DOWN_SECS + 2))")
	a_total=$(cdr_by carrier_id carrier-a)
	downs=$(metric metrics_end.txt sipedge_gateway_member_transitions_total 'group="carrier-a".*to="down"')
	note "calls that waited out carrier-a: $lost_in_hole in the hole's first ${HOLE_OUT_SECS} s, $lost_late after; carrier-a answered $a_total calls, $a_after in the last $((HOLE_RUN_SECS - HOLE_AT - HOLE_SECS - HOLE_DOWN_SECS - 2)) s; carrier-a down $downs times; longest wait $MAX_WAIT_MS ms"
	expect "every call answered ($ANSWERED of $OFFERED)" '[ "$ANSWERED" = "$OFFERED" ]'
	expect "no call waited past timeout_secs + $HOLE_MARGIN_MS ms (longest $MAX_WAIT_MS ms)" '[ "$MAX_WAIT_MS" -le $((1000 + HOLE_MARGIN_MS)) ]'
	expect "every call has its CDR ($(cdrs) for $OFFERED)" '[ "$(cdrs)" = "$OFFERED" ]'
	expect "the black hole noticed: calls waited out carrier-a ($lost_in_hole)" '[ "$lost_in_hole" -gt 0 ]'
	expect "carrier-a out within ${HOLE_OUT_SECS} s of the hole: no call waited it out after ($lost_late)" '[ "$lost_late" = 0 ]'
	expect "carrier-a back after the hole: it answered calls in the run's last seconds ($a_after)" '[ "$a_after" -gt 0 ]'
}

fault_carrier_late() {
	carrier a "$CHAOS/uas_late.xml"
	carrier b uas
	sipedge_config <<-EOF
		gateway:
		  groups:
		    - name: carrier-a
		      destinations:
		        - { uri: "sip:127.0.0.1:$A_PORT", address: "127.0.0.1:$A_PORT" }
		    - name: carrier-b
		      destinations:
		        - { uri: "sip:127.0.0.1:$B_PORT", address: "127.0.0.1:$B_PORT" }
		lcr:
		  static_routes:
		    - prefix: ""
		      routes:
		        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, timeout_secs: $LATE_RING_SECS, reroute_after_progress: true }
		        - { carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005 }
	EOF
	sipedge_up
	caller_start caller uac_call.xml $((LATE_RATE * LATE_SECS)) "$LATE_RATE"
	caller_wait caller
	sleep 3 # the last late 200s, their ACKs and BYEs
	scrape metrics_end.txt
	sipedge_down
	stop_carriers
	local a_calls a_done a_acks a_byes b_calls late
	a_calls=$(carrier_stat a TotalCallCreated)
	a_done=$(carrier_stat a 'SuccessfulCall(C)')
	a_acks=$(counts a '^[0-9]+_ACK_Recv$')
	a_byes=$(counts a '^[0-9]+_BYE_Recv$')
	b_calls=$(cdr_by carrier_id carrier-b)
	late=$(metric metrics_end.txt sipedge_late_answers_total)
	note "carrier-a: $a_calls calls, $a_acks late 200s ACKed, $a_byes BYEd ($a_done complete); sipedge_late_answers_total $late; carrier-b answered $b_calls"
	expect "every call answered by carrier-b ($ANSWERED of $OFFERED, carrier-b $b_calls)" '[ "$ANSWERED" = "$OFFERED" ] && [ "$b_calls" = "$OFFERED" ]'
	expect "every call has its CDR ($(cdrs) for $OFFERED)" '[ "$(cdrs)" = "$OFFERED" ]'
	expect "carrier-a saw every call ($a_calls of $OFFERED)" '[ "$a_calls" = "$OFFERED" ]'
	expect "every late 200 ACKed and BYEd ($a_acks ACKs, $a_byes BYEs for $a_calls)" '[ "$a_acks" = "$a_calls" ] && [ "$a_byes" = "$a_calls" ] && [ "$a_done" = "$a_calls" ]'
}

fault_carrier_lost_invites() {
	local calls q re i lost=$((LOSS_BURST + LOSS_SCATTERED))
	calls=$((LOSS_RATE * LOSS_SECS))
	q=$((calls / 4))
	re="^($q"
	for ((i = 1; i < LOSS_BURST; i++)); do re+="|$((q + i))"; done
	for ((i = 0; i < LOSS_SCATTERED; i++)); do re+="|$((2 * q + i * 2 * q / LOSS_SCATTERED + 7))"; done
	re+=")\$"
	gate "$re"
	carrier a "$WORK/uas_gate.xml" -set hole_from 0 -set hole_until 0
	sipedge_config <<-EOF
		gateway:
		  groups:
		    - name: carrier-a
		      destinations:
		        - { uri: "sip:127.0.0.1:$A_PORT", address: "127.0.0.1:$A_PORT" }
		lcr:
		  static_routes:
		    - prefix: ""
		      routes:
		        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004, timeout_secs: 5 }
	EOF
	sipedge_up
	caller_start caller uac_call.xml "$calls" "$LOSS_RATE"
	caller_wait caller
	scrape metrics_end.txt
	sipedge_down
	local tol downs attempts undialed noanswer other
	tol=$((OFFERED * LOSS_TOLERANCE_PERMILLE / 1000))
	downs=$(metric metrics_end.txt sipedge_gateway_member_transitions_total 'to="down"')
	attempts=$("$PYTHON" "$CHAOS/cdrcount.py" "$WORK/cdr.jsonl" attempt)
	undialed=$(awk '$1 ~ /\/undialed$/ { n += $2 } END { print n + 0 }' <<<"$attempts")
	noanswer=$(awk '$1 == "carrier-a/408/dialed" { n += $2 } END { print n + 0 }' <<<"$attempts")
	other=$((FAILED - noanswer))
	note "$lost INVITEs lost of $OFFERED; $noanswer calls dialled and not answered ($((noanswer - lost)) more than lost: the machine's own stalls); $undialed refused without a dial; $other failed otherwise; carrier-a marked down $downs times; final codes: $("$PYTHON" "$CHAOS/cdrcount.py" "$WORK/cdr.jsonl" final_code | paste -sd ' ')"
	expect "the lost INVITEs went unanswered ($noanswer calls, $lost lost)" '[ "$noanswer" -ge "$lost" ]'
	expect "the carrier stays up: no call refused without a dial ($undialed)" '[ "$undialed" = 0 ]'
	expect "only calls the carrier did not answer fail: $other failed otherwise (at most ${LOSS_TOLERANCE_PERMILLE} per mille, $tol)" '[ "$other" -le "$tol" ]'
	expect "every call has its CDR ($(cdrs) for $OFFERED)" '[ "$(cdrs)" = "$OFFERED" ]'
}
