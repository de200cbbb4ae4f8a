# The hostile-input faults; sourced by faults.sh. Beside each, a caller
# places HOSTILE_CALL_RATE live calls/s through sipedge to carrier-a (a
# SIPp UAS) for as long as the attack lasts; every live call must be
# answered, none waiting past HOSTILE_WAIT_MS, and sipedge must still
# answer its admin API (/healthz) afterwards. hostile.py makes the attack.

HOSTILE_CALL_RATE=${HOSTILE_CALL_RATE:-20}
HOSTILE_WAIT_MS=${HOSTILE_WAIT_MS:-1000}
# hostile-fuzz: FUZZ_COUNT mutated messages at FUZZ_RATE/s from a trunk's
# address (so that the flood guard lets them all reach the parser), 10 %
# of them over TCP, seeded from the fuzz corpora and the RFC 4475 tests.
FUZZ_COUNT=${FUZZ_COUNT:-20000}
FUZZ_RATE=${FUZZ_RATE:-2000}
# hostile-slowloris: SLOW_CONNS TCP connections from 127.0.0.2-5 (not a
# trunk), each sending an INVITE's head a byte a second, reopened when
# closed, for SLOW_SECS seconds, sip.tcp.message_timeout_ms SLOW_TIMEOUT_MS;
# the live calls come over TCP. Every connection must be closed by sipedge
# within the timeout + SLOW_MARGIN_SECS; past sip.tcp.max_conns_per_ip
# (100) a source's connections are refused.
SLOW_CONNS=${SLOW_CONNS:-480}
SLOW_SECS=${SLOW_SECS:-10}
SLOW_TIMEOUT_MS=${SLOW_TIMEOUT_MS:-3000}
SLOW_MARGIN_SECS=${SLOW_MARGIN_SECS:-2}
# hostile-flood: FLOOD_RATE OPTIONS/s from 127.0.0.9 (neither trunk nor
# carrier) for FLOOD_SECS seconds: the flood guard must ban the source. The
# flood shares sipedge's UDP socket with the live calls: a live datagram
# the kernel drops from the full buffer costs its caller a retransmission
# (0.5 s, then 1 s, ...), so a live call may wait up to FLOOD_WAIT_MS.
FLOOD_RATE=${FLOOD_RATE:-20000}
FLOOD_SECS=${FLOOD_SECS:-5}
FLOOD_WAIT_MS=${FLOOD_WAIT_MS:-4000}

# hostile_setup [SIPEDGE_YAML]: carrier-a and sipedge routing to it.
hostile_setup() {
	carrier a uas
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
		        - { carrier_id: carrier-a, gateway_group: carrier-a, rate: 0.004 }
		${1:-}
	EOF
	sipedge_up
}

# hostile_live_calls SECS: the live calls, in the background.
hostile_live_calls() { caller_start caller uac_call.xml $((HOSTILE_CALL_RATE * $1)) "$HOSTILE_CALL_RATE"; }

# hostile_common [WAIT_MS]: the live calls' expectations (none waiting past
# WAIT_MS, default HOSTILE_WAIT_MS) and sipedge's health.
hostile_common() {
	local healthy=no wait_ms=${1:-$HOSTILE_WAIT_MS}
	curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:$ADMIN_PORT/healthz" && healthy=yes
	expect "sipedge alive and answering /healthz after the attack" '[ "$healthy" = yes ] && alive'
	expect "every live call answered ($ANSWERED of $OFFERED)" '[ "$ANSWERED" = "$OFFERED" ] && [ "$OFFERED" -gt 0 ]'
	expect "no live call waited past $wait_ms ms (longest $MAX_WAIT_MS ms)" '[ "$MAX_WAIT_MS" -le "$wait_ms" ]'
}

fault_hostile_fuzz() {
	local secs out
	secs=$((FUZZ_COUNT / FUZZ_RATE + 2))
	hostile_setup
	hostile_live_calls "$secs"
	out=$("$PYTHON" "$CHAOS/hostile.py" fuzz --target "127.0.0.1:$SIP_PORT" --count "$FUZZ_COUNT" --rate "$FUZZ_RATE" \
		--seeds "$REPO/fuzz/testdata/fuzz" "$REPO/parser/testdata/rfc4475" 2>"$WORK/hostile.err") ||
		bad "hostile.py fuzz failed: $(tail -1 "$WORK/hostile.err")"
	caller_wait caller
	scrape metrics_end.txt
	hostile_common
	local parse_err malformed oversize framing
	parse_err=$(metric metrics_end.txt sipedge_sip_parse_errors_total)
	malformed=$(metric metrics_end.txt sipedge_sip_malformed_responses_dropped_total)
	oversize=$(metric metrics_end.txt sipedge_sip_oversize_datagrams_dropped_total)
	framing=$(metric metrics_end.txt sipedge_tcp_framing_errors_total)
	note "fuzzer: $out"
	note "sipedge: $parse_err parse errors, $malformed malformed responses dropped, $oversize oversize datagrams, $framing TCP framing errors"
	expect "the mutants reached the parser (parse errors counted: $parse_err)" '[ "$parse_err" -gt 0 ]'
	sipedge_down
}

fault_hostile_slowloris() {
	local out
	hostile_setup "sip: { tcp: { message_timeout_ms: $SLOW_TIMEOUT_MS, first_data_timeout_ms: $SLOW_TIMEOUT_MS } }"
	SIPP_T=t1 TRANSPORT=tcp hostile_live_calls "$SLOW_SECS"
	out=$("$PYTHON" "$CHAOS/hostile.py" slowloris --target "127.0.0.1:$SIP_PORT" --sources 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5 \
		--conns "$SLOW_CONNS" --secs "$SLOW_SECS" 2>"$WORK/hostile.err") ||
		bad "hostile.py slowloris failed: $(tail -1 "$WORK/hostile.err")"
	caller_wait caller
	scrape metrics_end.txt
	hostile_common
	local closed max_life oldest refused timeouts rejected bound
	closed=$(sed -E 's/.*closed_by_server=([0-9]+).*/\1/' <<<"$out")
	max_life=$(sed -E 's/.*max_life=([0-9.]+).*/\1/' <<<"$out")
	oldest=$(sed -E 's/.*oldest_open=([0-9.]+).*/\1/' <<<"$out")
	refused=$(sed -E 's/.*refused=([0-9]+).*/\1/' <<<"$out")
	timeouts=$(metric metrics_end.txt sipedge_tcp_timeouts_total)
	rejected=$(metric metrics_end.txt sipedge_tcp_connections_rejected_total)
	bound=$(awk -v t="$SLOW_TIMEOUT_MS" -v m="$SLOW_MARGIN_SECS" 'BEGIN { print t / 1000 + m }')
	note "slowloris: $out"
	note "sipedge: $timeouts TCP timeouts, $rejected connections rejected"
	expect "sipedge closes every slow connection within message_timeout_ms + ${SLOW_MARGIN_SECS} s (longest lived ${max_life} s, oldest still open ${oldest} s)" \
		'[ "$closed" -gt 0 ] && awk -v a="$max_life" -v b="$oldest" -v m="$bound" "BEGIN { exit !(a <= m && b <= m) }"'
	expect "connections past max_conns_per_ip refused ($refused refused, $rejected rejected)" '[ "$refused" -gt 0 ] || [ "$rejected" -gt 0 ]'
	sipedge_down
}

fault_hostile_flood() {
	local out
	hostile_setup
	hostile_live_calls $((FLOOD_SECS + 2))
	sleep 1
	out=$("$PYTHON" "$CHAOS/hostile.py" flood --target "127.0.0.1:$SIP_PORT" --source 127.0.0.9 \
		--rate "$FLOOD_RATE" --secs "$FLOOD_SECS" 2>"$WORK/hostile.err") ||
		bad "hostile.py flood failed: $(tail -1 "$WORK/hostile.err")"
	caller_wait caller
	scrape metrics_end.txt
	hostile_common "$FLOOD_WAIT_MS"
	local bans dropped sent
	bans=$(metric metrics_end.txt sipedge_flood_bans_total)
	dropped=$(metric metrics_end.txt sipedge_flood_dropped_total)
	sent=$(sed -E 's/^sent=([0-9]+).*/\1/' <<<"$out")
	note "flood: $out; sipedge banned $bans times, dropped $dropped"
	expect "the flood guard banned the source ($bans bans)" '[ "$bans" -gt 0 ]'
	expect "and dropped its messages ($dropped of $sent sent; a full socket buffer loses the rest)" '[ "$dropped" -gt $((sent / 2)) ]'
	sipedge_down
}
