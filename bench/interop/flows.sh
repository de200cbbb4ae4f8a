# The interop flows; sourced by flow.sh and run.sh, not run.
#
# FLOWS lists them in the order run.sh runs them, each "name|what it
# checks"; flow_NAME (dashes as underscores) runs one, with the building
# blocks of lib.sh: it starts the parts, places the call, ends the flow
# (end_flow) and checks what each side saw.

FLOWS=(
	# SIPp caller -> sipedge -> SIPp carrier, UDP unless named
	"call-caller-bye|a call; the caller hangs up: BYE relayed, CDR hangup_side caller"
	"call-carrier-bye|the carrier hangs up: its BYE reaches the caller at its Contact"
	"hold-unhold-caller|the caller's re-INVITEs (a=sendonly, a=sendrecv) and the carrier's answers pass unchanged"
	"hold-unhold-carrier|the carrier's re-INVITEs reach the caller, its answers go back"
	"update-both-ways|UPDATE with SDP from each side (RFC 3311), offers and answers unchanged"
	"early-media-183|the carrier's 183 with SDP reaches the caller with its SDP"
	"info-both-ways|INFO (application/dtmf-relay) each way, body and type unchanged"
	"bye-before-ack|the carrier hangs up before the caller's late ACK: the caller's BYE waits for its ACK (RFC 3261 15), the carrier gets its ACK"
	"cancel|CANCEL while ringing: 200 and 487 to the caller, CANCEL and ACK of the 487 at the carrier, CDR 487"
	"cancel-to-tag|the 200 to the CANCEL has the To tag of the 180 and the 487 (RFC 3261 9.2)"
	"refer-603|the caller's REFER is answered 603 and never reaches the carrier; the call goes on"
	"tcp-to-udp|caller over TCP, carrier over UDP: requests both ways, the carrier's over the caller's connection"
	"udp-to-tcp|caller over UDP, carrier over TCP: requests both ways"
	"preloaded-route|the caller's INVITE carries a Route naming sipedge (RFC 3261 8.1.1.1); the carrier sees no Route"
	"100rel-supported|a caller that supports 100rel, a carrier that sends reliable 18x when asked: the call goes through"
	"100rel-required|a caller that requires 100rel (RFC 3262) gets its 180 reliably, PRACKs it, and is answered"
	"session-timer-uac-refresher|the carrier's 2xx with Session-Expires refresher=uac reaches the caller with Require: timer (RFC 4028 9)"
	"redirect-302-reroute|reroute_causes lists 302: the carrier's 302 fails over to the next carrier, no 3xx to the caller"
	"redirect-302-not-relayed|a carrier's 302 never reaches the caller as a 3xx without Contact (RFC 3261 8.1.3.4, 21.3)"
	"options-ping|OPTIONS to sipedge: 200 with Allow"
	"options-capabilities|the 200 to OPTIONS has Accept and Supported, and its Allow no REFER (RFC 3261 11.2)"
	# Kamailio as the customer's proxy (kamrr: record_route(); kamnorr: not)
	"kamrr-dialog|requests both ways through a record-routing customer proxy: sipedge's carry its Route"
	"kamrr-cancel|CANCEL through the customer proxy"
	"kamrr-double-rr|caller over TCP, proxy to sipedge over UDP: two Record-Routes, sipedge's BYE carries both"
	"kamrr-other-host|the proxy record-routes another address (127.0.0.2): sipedge's BYE goes there (RFC 3261 12.2.1.1)"
	"kamnorr-caller-bye|a proxy without record_route: the caller's ACK and BYE go to sipedge's Contact, the call ends"
	"kamnorr-carrier-bye|a proxy without record_route: the carrier's BYE reaches the caller at its Contact (RFC 3261 12.2.1.1)"
	"kamnorr-dialog|a proxy without record_route: the carrier's re-INVITE, INFO and BYE reach the caller"
	# Kamailio as the carrier's proxy (record_route()), and on both sides
	"kamcarrier-dialog|requests both ways through a record-routing carrier proxy"
	"kamcarrier-cancel|CANCEL through the carrier's proxy, 487 back"
	"kamboth-dialog|a customer proxy and a carrier proxy, requests both ways"
	"kamboth-cancel|CANCEL through both proxies"
	# baresip as the caller
	"baresip-caller-bye|baresip calls and hangs up"
	"baresip-carrier-bye|the carrier hangs up: baresip gets the BYE at its Contact and answers it"
	"baresip-tcp-carrier-bye|baresip over TCP, carrier over UDP: the carrier's BYE reaches baresip over its connection"
	"baresip-kamnorr-carrier-bye|baresip behind a proxy without record_route: the carrier's BYE reaches baresip (RFC 3261 12.2.1.1)"
)

flow_call_caller_bye() {
	carrier carrier uas_answer.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_basic.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_cdr hangup_side caller
}

flow_call_carrier_bye() {
	carrier carrier uas_bye.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_wait_bye.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "BYE the caller got (Request-URI: its Contact)" "^BYE sip:alice@127\.0\.0\.1:$CALLER_PORT;transport=UDP SIP/2\.0$" \
		< <(msgs caller -v dir=received -v start='^BYE ')
	expect_cdr hangup_side callee
}

flow_hold_unhold_caller() {
	carrier carrier uas_held.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_hold.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "INVITE SDP the carrier got" 'a=sendrecv' 'a=sendonly' 'a=sendrecv' \
		< <(msgs carrier -v dir=received -v start='^INVITE ' -v hdr=body)
	expect_lines "2xx SDP the caller got" 'a=sendrecv' 'a=recvonly' 'a=sendrecv' \
		< <(msgs caller -v dir=received -v start='^SIP/2.0 200' -v cseq='INVITE$' -v hdr=body)
	expect_cdr hangup_side caller
}

flow_hold_unhold_carrier() {
	carrier carrier uas_holds.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_held.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "re-INVITE SDP the caller got" 'a=sendonly' 'a=sendrecv' \
		< <(msgs caller -v dir=received -v start='^INVITE ' -v hdr=body)
	expect_lines "re-INVITE 2xx SDP the carrier got" 'a=recvonly' 'a=sendrecv' \
		< <(msgs carrier -v dir=received -v start='^SIP/2.0 200' -v cseq='INVITE$' -v hdr=body)
	expect_cdr hangup_side caller
}

flow_update_both_ways() {
	carrier carrier uas_update.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_update.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "UPDATE SDP the carrier got" 'm=audio [0-9]+ RTP/AVP 0 8' \
		< <(msgs carrier -v dir=received -v start='^UPDATE ' -v hdr=body)
	expect_lines "UPDATE 2xx SDP the caller got" 'm=audio [0-9]+ RTP/AVP 8' \
		< <(msgs caller -v dir=received -v start='^SIP/2.0 200' -v cseq='UPDATE$' -v hdr=body)
	expect_lines "UPDATE SDP the caller got" 'o=carrier 1 3 ' \
		< <(msgs caller -v dir=received -v start='^UPDATE ' -v hdr=body)
	expect_cdr hangup_side caller
}

flow_early_media_183() {
	carrier carrier uas_early_media.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_early_media.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "183's Content-Type at the caller" '^application/sdp$' \
		< <(msgs caller -v dir=received -v start='^SIP/2.0 183' -v hdr=Content-Type)
	expect_lines "183's SDP at the caller (the carrier's, unchanged)" '^v=0\|o=carrier 7 7 .*m=audio [0-9]+ RTP/AVP 0' \
		< <(msgs caller -v dir=received -v start='^SIP/2.0 183' -v hdr=body)
	expect_cdr final_code 200
}

flow_info_both_ways() {
	carrier carrier uas_info.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_info.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "INFO at the carrier: Content-Type" '^application/dtmf-relay$' \
		< <(msgs carrier -v dir=received -v start='^INFO ' -v hdr=Content-Type)
	expect_lines "INFO at the carrier: body" '^Signal=5\|Duration=160$' \
		< <(msgs carrier -v dir=received -v start='^INFO ' -v hdr=body)
	expect_lines "INFO at the caller: body" '^Signal=9\|Duration=160$' \
		< <(msgs caller -v dir=received -v start='^INFO ' -v hdr=body)
	expect_cdr hangup_side caller
}

flow_bye_before_ack() {
	carrier carrier uas_bye_before_ack.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_late_ack.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	# The order the caller saw: the BYE only after its ACK.
	expect_lines "what the caller sent and got after the 200" '^ACK ' '^BYE ' '^SIP/2.0 200' \
		< <(msgs caller | sed -n '/^SIP\/2.0 200/,$p' | sed 1d)
	expect_cdr hangup_side callee
}

# cancel_flow: the caller cancels a ringing call (uac_cancel.xml, uas_ring_cancel.xml).
cancel_flow() {
	carrier carrier uas_ring_cancel.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_cancel.xml "127.0.0.1:$SIP_PORT"
	end_flow
}

flow_cancel() {
	cancel_flow
	sipp_ok caller carrier
	expect_lines "CANCEL at the carrier" '^CANCEL ' < <(msgs carrier -v dir=received -v start='^CANCEL ')
	expect_lines "ACK of the 487 at the carrier" '^ACK ' < <(msgs carrier -v dir=received -v start='^ACK ')
	expect_cdr final_code 487
	expect_cdr hangup_side caller
}

flow_cancel_to_tag() {
	cancel_flow
	sipp_ok caller carrier
	local t180 t200 t487
	t180=$(tag "$(msgs caller -v dir=received -v start='^SIP/2.0 180' -v hdr=To | head -1)")
	t200=$(tag "$(msgs caller -v dir=received -v start='^SIP/2.0 200' -v cseq='CANCEL$' -v hdr=To | head -1)")
	t487=$(tag "$(msgs caller -v dir=received -v start='^SIP/2.0 487' -v hdr=To | head -1)")
	[ -n "$t180" ] && [ "$t487" = "$t180" ] || bad "487 To tag '$t487', 180's '$t180': want one"
	[ "$t200" = "$t487" ] || bad "the 200 to CANCEL has To tag '$t200', the 180 and 487 '$t487' (RFC 3261 9.2: the same)"
}

flow_refer_603() {
	carrier carrier uas_answer.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_refer.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "REFER at the carrier" < <(msgs carrier -v dir=received -v start='^REFER ')
	expect_cdr hangup_side caller
}

flow_tcp_to_udp() {
	carrier carrier uas_dialog.xml udp
	gateway carrier-a "127.0.0.1:$carrier_PORT" udp
	sipedge_up
	caller uac_dialog.xml "127.0.0.1:$SIP_PORT" tcp
	end_flow
	sipp_ok caller carrier
	expect_lines "carrier's requests at the caller (over its TCP connection)" '^INVITE ' '^INFO ' '^BYE ' \
		< <(msgs caller -v dir=received -v start='^(INVITE|INFO|BYE) ')
	grep -q '^TCP message received' "$WORK/caller_msg.log" || bad "the caller got nothing over TCP"
	grep -q '^UDP message received' "$WORK/carrier_msg.log" || bad "the carrier got nothing over UDP"
	expect_cdr hangup_side callee
}

flow_udp_to_tcp() {
	carrier carrier uas_dialog.xml tcp
	gateway carrier-a "127.0.0.1:$carrier_PORT" tcp
	sipedge_up
	caller uac_dialog.xml "127.0.0.1:$SIP_PORT" udp
	end_flow
	sipp_ok caller carrier
	expect_lines "caller's requests at the carrier (over TCP)" '^INVITE ' '^ACK ' '^INVITE ' '^ACK ' \
		< <(msgs carrier -v dir=received -v start='^[A-Z]+ ' -v cseq='(INVITE|ACK)$')
	grep -q '^TCP message received' "$WORK/carrier_msg.log" || bad "the carrier got nothing over TCP"
	expect_cdr hangup_side callee
}

flow_preloaded_route() {
	carrier carrier uas_answer.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_basic.xml "127.0.0.1:$SIP_PORT" udp -key route "Route: <sip:127.0.0.1:$SIP_PORT;lr>"
	end_flow
	sipp_ok caller carrier
	expect_lines "Route of the caller's INVITE" "^<sip:127\.0\.0\.1:$SIP_PORT;lr>$" \
		< <(msgs caller -v dir=sent -v start='^INVITE ' -v hdr=Route)
	expect_lines "Route of the carrier's INVITE" '^<none>$' < <(msgs carrier -v dir=received -v start='^INVITE ' -v hdr=Route)
	expect_cdr hangup_side caller
}

flow_100rel_supported() {
	carrier carrier uas_100rel.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_100rel.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_cdr hangup_side caller
}

flow_100rel_required() {
	carrier carrier uas_100rel.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_100rel.xml "127.0.0.1:$SIP_PORT" udp -key rel "Require: 100rel"
	end_flow
	local final
	final=$(msgs caller -v dir=received -v start='^SIP/2.0 [2-6]' -v cseq='INVITE$' | head -1)
	[[ $final == "SIP/2.0 200"* ]] || bad "the caller, which requires 100rel, got '$final' (RFC 3262: sipedge may PRACK the carrier's or send its own, not refuse)"
	sipp_ok caller carrier
	expect_lines "RSeq of the 180 the caller got (it requires 100rel: RFC 3262 3)" '^[0-9]+$' \
		< <(msgs caller -v dir=received -v start='^SIP/2.0 180' -v hdr=RSeq)
	expect_cdr hangup_side caller
}

flow_session_timer_uac_refresher() {
	carrier carrier uas_session_timer.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_session_timer.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "Supported of the carrier's INVITE" 'timer' < <(msgs carrier -v dir=received -v start='^INVITE ' -v hdr=Supported)
	expect_lines "Session-Expires of the caller's 200" '^1800;refresher=uac$' \
		< <(msgs caller -v dir=received -v start='^SIP/2.0 200' -v cseq='INVITE$' -v hdr=Session-Expires)
	expect_lines "Require of the caller's 200 (refresher=uac: RFC 4028 9)" 'timer' \
		< <(msgs caller -v dir=received -v start='^SIP/2.0 200' -v cseq='INVITE$' -v hdr=Require)
}

flow_redirect_302_reroute() {
	carrier carrier_a uas_302.xml
	carrier carrier_b uas_answer.xml
	gateway carrier-a "127.0.0.1:$carrier_a_PORT"
	gateway carrier-b "127.0.0.1:$carrier_b_PORT"
	sipedge_up "reroute_causes: [302, 408, 500, 502, 503, 504]"
	caller uac_basic.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier_a carrier_b
	expect_lines "3xx at the caller" < <(msgs caller -v dir=received -v start='^SIP/2.0 3')
	expect_cdr carrier_id carrier-b
	grep -q '"carrier_id":"carrier-a","status":302' "$WORK/cdr.jsonl" || bad "CDR lcr_attempts lack carrier-a's 302: $(cdr_field lcr_attempts)"
}

flow_redirect_302_not_relayed() {
	carrier carrier uas_302.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	caller uac_failure.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	local final contact
	final=$(msgs caller -v dir=received -v start='^SIP/2.0 [3-6]' -v cseq='INVITE$' | head -1)
	contact=$(msgs caller -v dir=received -v start='^SIP/2.0 3' -v cseq='INVITE$' -v hdr=Contact | head -1)
	[ -n "$final" ] || bad "the caller got no final response"
	if [[ $final == "SIP/2.0 3"* ]] && [ "$contact" = "<none>" ]; then
		bad "the caller got '$final' without a Contact (a 3xx names where to go: RFC 3261 21.3, 8.1.3.4)"
	fi
}

flow_options_ping() {
	sipedge_up
	caller uac_options.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller
	local allow m
	allow=$(msgs caller -v dir=received -v start='^SIP/2.0 200' -v hdr=Allow | head -1)
	for m in INVITE ACK CANCEL BYE OPTIONS; do
		grep -qw "$m" <<<"$allow" || bad "Allow of the 200 to OPTIONS lacks $m: '$allow'"
	done
}

flow_options_capabilities() {
	sipedge_up
	caller uac_options.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller
	local allow accept supported
	allow=$(msgs caller -v dir=received -v start='^SIP/2.0 200' -v hdr=Allow | head -1)
	accept=$(msgs caller -v dir=received -v start='^SIP/2.0 200' -v hdr=Accept | head -1)
	supported=$(msgs caller -v dir=received -v start='^SIP/2.0 200' -v hdr=Supported | head -1)
	grep -q 'application/sdp' <<<"$accept" || bad "200 to OPTIONS: Accept '$accept', want application/sdp (RFC 3261 11.2)"
	[ "$supported" != "<none>" ] || bad "200 to OPTIONS has no Supported (RFC 3261 11.2)"
	! grep -qw REFER <<<"$allow" || bad "200 to OPTIONS: Allow '$allow' lists REFER, which sipedge refuses (603)"
}

# sipedge_requests PROXY: the requests but ACK that sipedge sent through
# Kamailio PROXY, as it logged them (method, Request-URI, source, local
# socket, transport, Route count...).
sipedge_requests() { kam_lines "$1" '^in\|' "\|127\.0\.0\.1:$SIP_PORT\|" '^in\|(INVITE|BYE|INFO|UPDATE|PRACK|OPTIONS)\|'; }

flow_kamrr_dialog() {
	carrier carrier uas_dialog.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT" -A WITH_RR
	caller uac_dialog.xml "127.0.0.1:$customer_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "sipedge's requests at the customer proxy (Route: the proxy)" \
		"^in\|INVITE\|sip:alice@.*\|routes=1\|route=<sip:127\.0\.0\.1:$customer_PORT;lr>" '^in\|INFO\|.*\|routes=1\|' '^in\|BYE\|.*\|routes=1\|' \
		< <(sipedge_requests customer)
	expect_cdr hangup_side callee
}

flow_kamrr_cancel() {
	carrier carrier uas_ring_cancel.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT" -A WITH_RR
	caller uac_cancel.xml "127.0.0.1:$customer_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "the caller's CANCEL at the customer proxy" '^in\|CANCEL\|' \
		< <(kam_lines customer '^in\|CANCEL\|' "\|127\.0\.0\.1:$CALLER_PORT\|")
	expect_cdr final_code 487
}

flow_kamrr_double_rr() {
	carrier carrier uas_bye.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	# The caller over TCP, sipedge over UDP: the proxy record-routes twice
	# (RFC 3261 16.6 step 4 allows it), once per side.
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT;transport=udp" -A WITH_RR
	caller uac_wait_bye.xml "127.0.0.1:$customer_PORT" tcp
	end_flow
	sipp_ok caller carrier
	local rr_udp="<sip:127\.0\.0\.1:$customer_PORT;r2=on;lr>" rr_tcp="<sip:127\.0\.0\.1:$customer_PORT;transport=tcp;r2=on;lr>"
	expect_lines "Record-Route of the 200 the caller got" "^$rr_udp$" "^$rr_tcp$" \
		< <(msgs caller -v dir=received -v start='^SIP/2.0 200' -v cseq='INVITE$' -v hdr=Record-Route -v all=1)
	expect_lines "sipedge's BYE at the customer proxy (both Routes, the Record-Route's order)" "^in\|BYE\|.*\|udp\|routes=[12]\|route=$rr_udp, ?$rr_tcp\|" \
		< <(sipedge_requests customer)
	grep -q '^TCP message received' "$WORK/caller_msg.log" || bad "the caller got nothing over TCP"
	expect_cdr hangup_side callee
}

flow_kamrr_other_host() {
	local vip_PORT
	pick 1 vip_PORT
	carrier carrier uas_bye.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	# The proxy receives on 127.0.0.1 but record-routes its other address,
	# 127.0.0.2 (a VIP, or the next proxy of a pair): in-dialog requests go
	# there (RFC 3261 12.2.1.1, 16.12: the first Route is the next hop).
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT" -l "udp:127.0.0.2:$vip_PORT" -A WITH_RR -A "RR_PRESET=\"127.0.0.2:$vip_PORT\""
	caller uac_wait_bye.xml "127.0.0.1:$customer_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "Record-Route of the 200 the caller got" "^<sip:127\.0\.0\.2:$vip_PORT;lr>$" \
		< <(msgs caller -v dir=received -v start='^SIP/2.0 200' -v cseq='INVITE$' -v hdr=Record-Route -v all=1)
	local bye
	bye=$(sipedge_requests customer | grep '^in|BYE|' | head -1)
	[ -n "$bye" ] || bad "no BYE from sipedge at the customer proxy"
	if [ -n "$bye" ] && ! grep -q "|127\.0\.0\.2:$vip_PORT|" <<<"$bye"; then
		bad "sipedge sent its BYE to $(cut -d'|' -f5 <<<"$bye"), the INVITE's source, not to 127.0.0.2:$vip_PORT, its Route (RFC 3261 12.2.1.1, 8.1.2)"
	fi
}

flow_kamnorr_caller_bye() {
	carrier carrier uas_answer.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT"
	caller uac_basic.xml "127.0.0.1:$customer_PORT"
	end_flow
	sipp_ok caller carrier
	# No route set: the caller's ACK and BYE go to sipedge's Contact, not
	# through the proxy (RFC 3261 12.2.1.1).
	expect_lines "requests at the customer proxy" '^in\|INVITE\|' < <(kam_lines customer '^in\|')
	expect_cdr hangup_side caller
}

# norr_bye_reason: why sipedge's requests did not reach the caller behind
# a proxy that does not record-route, from the proxy's log.
norr_bye_reason() {
	local got
	got=$(kam_lines customer '^answered\|404\|' | head -1)
	[ -n "$got" ] && bad "sipedge sent '$(cut -d'|' -f3-4 <<<"$got" | tr '|' ' ')' to the customer proxy (the INVITE's source), which answered 404: it is not on the dialog's path; the caller's Contact is (RFC 3261 12.2.1.1)"
}

flow_kamnorr_carrier_bye() {
	carrier carrier uas_bye.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT"
	caller uac_wait_bye.xml "127.0.0.1:$customer_PORT"
	end_flow
	expect_lines "BYE the caller got" '^BYE sip:alice@' < <(msgs caller -v dir=received -v start='^BYE ')
	norr_bye_reason
	sipp_ok caller carrier
	expect_cdr hangup_side callee
}

flow_kamnorr_dialog() {
	carrier carrier uas_dialog.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT"
	caller uac_dialog.xml "127.0.0.1:$customer_PORT"
	end_flow
	expect_lines "the carrier's requests at the caller" '^INVITE ' '^INFO ' '^BYE ' \
		< <(msgs caller -v dir=received -v start='^(INVITE|INFO|BYE) ')
	norr_bye_reason
	sipp_ok caller carrier
}

flow_kamcarrier_dialog() {
	carrier carrier uas_dialog.xml
	kamailio_up carrierproxy "sip:127.0.0.1:$carrier_PORT" -A WITH_RR
	gateway carrier-a "127.0.0.1:$carrierproxy_PORT"
	sipedge_up
	caller uac_dialog.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "sipedge's requests at the carrier's proxy (Route: the proxy)" \
		"^in\|INVITE\|sip:1000@.*\|routes=0\|.*\|rr=0\|" "^in\|INVITE\|sip:carrier@.*\|routes=1\|route=<sip:127\.0\.0\.1:$carrierproxy_PORT;lr>" \
		< <(sipedge_requests carrierproxy)
	expect_lines "the carrier's requests through its proxy" '^in\|INVITE\|sip:sipedge@.*\|routes=1\|' '^in\|INFO\|sip:sipedge@.*\|routes=1\|' '^in\|BYE\|sip:sipedge@.*\|routes=1\|' \
		< <(kam_lines carrierproxy '^in\|(INVITE|INFO|BYE)\|' "\|127\.0\.0\.1:$carrier_PORT\|")
	expect_cdr hangup_side callee
}

flow_kamcarrier_cancel() {
	carrier carrier uas_ring_cancel.xml
	kamailio_up carrierproxy "sip:127.0.0.1:$carrier_PORT" -A WITH_RR
	gateway carrier-a "127.0.0.1:$carrierproxy_PORT"
	sipedge_up
	caller uac_cancel.xml "127.0.0.1:$SIP_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "sipedge's CANCEL at the carrier's proxy" '^in\|CANCEL\|' < <(kam_lines carrierproxy '^in\|CANCEL\|' "\|127\.0\.0\.1:$SIP_PORT\|")
	expect_cdr final_code 487
}

flow_kamboth_dialog() {
	carrier carrier uas_dialog.xml
	kamailio_up carrierproxy "sip:127.0.0.1:$carrier_PORT" -A WITH_RR
	gateway carrier-a "127.0.0.1:$carrierproxy_PORT"
	sipedge_up
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT" -A WITH_RR
	caller uac_dialog.xml "127.0.0.1:$customer_PORT"
	end_flow
	sipp_ok caller carrier
	expect_lines "sipedge's requests at the customer proxy" '^in\|INVITE\|sip:alice@.*\|routes=1\|' '^in\|INFO\|.*\|routes=1\|' '^in\|BYE\|.*\|routes=1\|' \
		< <(sipedge_requests customer)
	expect_lines "sipedge's requests at the carrier's proxy" '^in\|INVITE\|sip:1000@.*\|routes=0\|' '^in\|INVITE\|sip:carrier@.*\|routes=1\|' \
		< <(sipedge_requests carrierproxy)
	expect_cdr hangup_side callee
}

flow_kamboth_cancel() {
	carrier carrier uas_ring_cancel.xml
	kamailio_up carrierproxy "sip:127.0.0.1:$carrier_PORT" -A WITH_RR
	gateway carrier-a "127.0.0.1:$carrierproxy_PORT"
	sipedge_up
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT" -A WITH_RR
	caller uac_cancel.xml "127.0.0.1:$customer_PORT"
	end_flow
	sipp_ok caller carrier
	expect_cdr final_code 487
}

# baresip_ok: baresip ran until it quit (-t), without an error.
baresip_ok() {
	[ "${RC[baresip]:-?}" = 0 ] || bad "baresip: exit status ${RC[baresip]}: $(grep -a -m1 -iE 'error|fail' "$WORK/baresip.log" | tr -d '\033' | cut -c1-160)"
}

flow_baresip_caller_bye() {
	carrier carrier uas_answer.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	baresip_call "sip:1000@127.0.0.1:$SIP_PORT" 2
	end_flow
	baresip_ok
	sipp_ok carrier
	expect_lines "requests baresip sent" '^INVITE ' "^ACK sip:sipedge@127\.0\.0\.1:$SIP_PORT " "^BYE sip:sipedge@127\.0\.0\.1:$SIP_PORT " \
		< <(msgs baresip -v dir=sent -v start='^[A-Z]+ ')
	expect_lines "final responses baresip got" '^SIP/2.0 200 ' '^SIP/2.0 200 ' \
		< <(msgs baresip -v dir=received -v start='^SIP/2.0 [2-6]')
	expect_cdr hangup_side caller
}

flow_baresip_carrier_bye() {
	carrier carrier uas_bye.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	baresip_call "sip:1000@127.0.0.1:$SIP_PORT" 2
	end_flow
	baresip_ok
	sipp_ok carrier
	expect_lines "BYE baresip got (Request-URI: its Contact)" "^BYE sip:alice-[^@]*@$BARESIP_ADDR SIP/2.0" \
		< <(msgs baresip -v dir=received -v start='^BYE ')
	expect_lines "baresip's answer to the BYE" '^SIP/2.0 200 ' < <(msgs baresip -v dir=sent -v cseq='BYE$')
	expect_cdr hangup_side callee
}

flow_baresip_tcp_carrier_bye() {
	carrier carrier uas_bye.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	baresip_call "sip:1000@127.0.0.1:$SIP_PORT;transport=tcp" 2 tcp
	end_flow
	baresip_ok
	sipp_ok carrier
	grep -aq "^TCP 127\.0\.0\.1:$SIP_PORT -> " "$WORK/baresip.log" || bad "baresip got nothing from sipedge over TCP"
	expect_lines "BYE baresip got" "^BYE sip:alice-[^@]*@$BARESIP_ADDR;transport=tcp SIP/2.0" \
		< <(msgs baresip -v dir=received -v start='^BYE ')
	expect_lines "baresip's answer to the BYE" '^SIP/2.0 200 ' < <(msgs baresip -v dir=sent -v cseq='BYE$')
	expect_cdr hangup_side callee
}

flow_baresip_kamnorr_carrier_bye() {
	carrier carrier uas_bye.xml
	gateway carrier-a "127.0.0.1:$carrier_PORT"
	sipedge_up
	kamailio_up customer "sip:127.0.0.1:$SIP_PORT"
	baresip_call "sip:1000@127.0.0.1:$customer_PORT" 2
	end_flow
	expect_lines "BYE baresip got" "^BYE sip:alice-[^@]*@$BARESIP_ADDR SIP/2.0" \
		< <(msgs baresip -v dir=received -v start='^BYE ')
	norr_bye_reason
	baresip_ok
	sipp_ok carrier
	expect_cdr hangup_side callee
}
