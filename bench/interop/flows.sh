# The interop flows; sourced by flow.sh and run.sh, not run.
#
# FLOWS lists them in the order run.sh runs them, each "name|what it
# checks"; flow_NAME (dashes as underscores) runs one, with the building
# blocks of lib.sh: it starts the parts, places the call, ends the flow
# (end_flow) and checks what each side saw.

FLOWS=(
	"call-caller-bye|plain call, the caller hangs up: BYE relayed to the carrier, CDR hangup_side caller"
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
