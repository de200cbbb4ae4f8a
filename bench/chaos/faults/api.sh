# The routing API faults; sourced by faults.sh. sipedge routes by the LCR
# API (lcr.api_url, the stub lcrstub.py, cache_ttl_secs 0 so that every
# call asks) to the gateway group carrier-a, a SIPp UAS. The API times out
# after API_TIMEOUT_MS.
#
# With lcr.fallback_gateway_group (carrier-a): the API answers for
# API_FAULT_AT seconds, fails for API_FAULT_SECS, then answers again, while
# a caller places API_RATE calls/s for API_SECS seconds. Every call must be
# answered (by the API's route or the fallback), none may wait past
# API_TIMEOUT_MS + API_MARGIN_MS for its first 180 or final response, and
# calls placed from 6 s after the API is back (the circuit breaker's 5 s
# and a margin) must be routed by the API again: API_SECS must leave a few
# seconds for them after API_FAULT_AT + API_FAULT_SECS + 6.
#
# Without a fallback: the API fails from the start while the caller places
# API_RATE calls/s for API_NOFB_SECS seconds. Every call must be refused
# (503) without waiting past API_TIMEOUT_MS + API_MARGIN_MS, each with a
# CDR.

API_RATE=${API_RATE:-20}
API_SECS=${API_SECS:-18}
API_FAULT_AT=${API_FAULT_AT:-2}
API_FAULT_SECS=${API_FAULT_SECS:-5}
API_NOFB_SECS=${API_NOFB_SECS:-5}
API_TIMEOUT_MS=${API_TIMEOUT_MS:-500}
API_MARGIN_MS=${API_MARGIN_MS:-1000}
API_SLOW_MS=${API_SLOW_MS:-$((API_TIMEOUT_MS * 2 / 5))}

# api_setup FALLBACK: carrier-a and sipedge asking the stub's port, with
# the fallback group when FALLBACK is "yes".
api_setup() {
	local fb=
	[ "$1" = yes ] && fb="fallback_gateway_group: carrier-a"
	carrier a uas
	pick 1 STUB_PORT
	sipedge_config <<-EOF
		gateway:
		  groups:
		    - name: carrier-a
		      destinations:
		        - { uri: "sip:127.0.0.1:$A_PORT", address: "127.0.0.1:$A_PORT" }
		lcr:
		  api_url: "http://127.0.0.1:$STUB_PORT/route"
		  timeout_ms: $API_TIMEOUT_MS
		  $fb
	EOF
}

# expect_waits: no call waited past lcr.timeout_ms + API_MARGIN_MS.
expect_waits() {
	expect "no call waited past lcr.timeout_ms + $API_MARGIN_MS ms (longest $MAX_WAIT_MS ms)" \
		'[ "$MAX_WAIT_MS" -le $((API_TIMEOUT_MS + API_MARGIN_MS)) ]'
}

# api_failures_note: sipedge's API failures by kind, as a note.
api_failures_note() {
	local k n out=
	scrape metrics_end.txt
	for k in timeout transport 5xx status invalid breaker_open overloaded; do
		n=$(metric metrics_end.txt sipedge_lcr_api_failures_total "kind=\"$k\"")
		[ "$n" = "?" ] || [ "$n" = 0 ] || out+=" $k=$n"
	done
	note "API failures:${out:- none}"
}

# api_with_fallback MODE: the API answers, fails as MODE says (down: the
# stub stops; hang, garbage, slow:MS: lcrstub.py's modes), answers again.
api_with_fallback() {
	local mode=$1 t_heal
	api_setup yes
	stub_start ok
	sipedge_up
	caller_start caller uac_call.xml $((API_RATE * API_SECS)) "$API_RATE"
	sleep "$API_FAULT_AT"
	if [ "$mode" = down ]; then stub_stop; else stub_mode "$mode"; fi
	sleep "$API_FAULT_SECS"
	if [ "$mode" = down ]; then stub_start ok; else stub_mode ok; fi
	t_heal=$(now)
	caller_wait caller
	api_failures_note
	sipedge_down
	local fb lcr late_fb late_lcr after
	after=$(awk -v t="$t_heal" 'BEGIN { printf "%.3f", t + 6 }')
	fb=$(cdr_by route_source fallback)
	lcr=$(cdr_by route_source lcr)
	late_fb=$(cdr_by route_source fallback --after "$after")
	late_lcr=$(cdr_by route_source lcr --after "$after")
	note "routed by the API $lcr, by the fallback $fb; from 6 s after the API came back: API $late_lcr, fallback $late_fb; longest wait ${MAX_WAIT_MS} ms"
	expect "calls with fallback all answered ($ANSWERED of $OFFERED)" '[ "$ANSWERED" = "$OFFERED" ] && [ "$FAILED" = 0 ]'
	expect_waits
	expect "every call has its CDR ($(cdrs) for $OFFERED)" '[ "$(cdrs)" = "$OFFERED" ]'
	expect "routed by the API again from 6 s after it came back (API $late_lcr, fallback $late_fb; no call then means API_SECS is too short)" \
		'[ "$late_lcr" -gt 0 ] && [ "$late_fb" = 0 ]'
	case $mode in
	slow:*) expect "a slow API (${mode#slow:} ms) routes every call: none by the fallback ($fb)" '[ "$fb" = 0 ]' ;;
	*) expect "the fallback routed the calls the API failed ($fb)" '[ "$fb" -gt 0 ]' ;;
	esac
}

# api_without_fallback MODE [LCRSTUB_ARGS...]: the API fails as MODE says
# from the start.
api_without_fallback() {
	local mode=$1
	shift
	api_setup no
	[ "$mode" = down ] || stub_start "$mode" "$@"
	sipedge_up
	caller_start caller uac_call.xml $((API_RATE * API_NOFB_SECS)) "$API_RATE"
	caller_wait caller
	api_failures_note
	sipedge_down
	local c503
	c503=$(cdr_by final_code 503)
	note "longest wait ${MAX_WAIT_MS} ms; $c503 CDRs with final_code 503"
	expect "every call refused ($FAILED of $OFFERED failed)" '[ "$FAILED" = "$OFFERED" ] && [ "$ANSWERED" = 0 ]'
	expect_waits
	expect "every refused call has a CDR with final_code 503 ($c503 of $OFFERED)" '[ "$c503" = "$OFFERED" ]'

}

fault_api_down_fallback() { api_with_fallback down; }
fault_api_hang_fallback() { api_with_fallback hang; }
fault_api_slow_fallback() { api_with_fallback "slow:$API_SLOW_MS"; }
fault_api_garbage_fallback() { api_with_fallback garbage; }
fault_api_down() { api_without_fallback down; }
fault_api_hang() { api_without_fallback hang; }
fault_api_garbage() { api_without_fallback garbage --garbage-from 6; }
