# siplog.awk: what one side of a flow saw, from its own trace.
#
# Reads SIPp's message trace (-trace_msg -message_file FILE) or baresip's
# SIP trace (baresip -s, on its standard output) and prints one line per
# message that matches:
#
#   dir=sent|received    the message's direction as that side saw it (any if empty)
#   start=REGEX          its start line ("^BYE ", "^SIP/2.0 487 ")
#   cseq=REGEX           its CSeq value ("INVITE$", "^2 ")
#   self=IP:PORT         baresip only: its own address, and
#   peers="IP:PORT ..."  the addresses it talks to: a message from self or to
#                        a peer is one it sent (over TCP it sends from other ports)
#   rtx=1                keep retransmissions (by default a message with the
#                        direction, start line, Call-ID, CSeq and first Via of
#                        one before is left out)
#
# The line printed is the message's start line, or with hdr=NAME the value
# of its first header NAME (case-insensitive, compact forms included),
# "<none>" when it has none; with hdr=NAME and all=1 every such header's
# value on its own line, nothing when there is none; hdr=body prints the
# body's lines joined with "|".
#
#   awk -f siplog.awk -v dir=received -v start='^SIP/2.0 200' -v cseq='CANCEL$' -v hdr=To caller_msg.log

BEGIN {
	compact["i"] = "call-id"; compact["m"] = "contact"; compact["f"] = "from"
	compact["t"] = "to"; compact["v"] = "via"; compact["l"] = "content-length"
	compact["c"] = "content-type"; compact["k"] = "supported"; compact["r"] = "refer-to"
	compact["x"] = "session-expires"; compact["e"] = "content-encoding"
	want = tolower(hdr)
}

# flush: print what the message in hand yields, if it matches.
function flush(   i, name, value, found, key) {
	if (!inmsg) return
	inmsg = 0
	if (dir != "" && mdir != dir) return
	if (start != "" && lines[1] !~ start) return
	if (cseq != "" && hval["cseq"] !~ cseq) return
	key = mdir SUBSEP lines[1] SUBSEP hval["call-id"] SUBSEP hval["cseq"] SUBSEP hval["via"]
	if (!rtx && key in seen) return
	seen[key] = 1
	if (want == "") { print lines[1]; return }
	if (want == "body") { print body; return }
	found = 0
	for (i = 2; i <= nlines; i++) {
		name = lines[i]; sub(/[ \t]*:.*/, "", name); name = tolower(name)
		if (name in compact) name = compact[name]
		if (name != want) continue
		value = lines[i]; sub(/^[^:]*:[ \t]*/, "", value)
		print value
		found = 1
		if (!all) return
	}
	if (!found && !all) print "<none>"
}

# begin DIRECTION: a new message starts on the next line.
function begin(d) {
	flush()
	inmsg = 1; mdir = d; nlines = 0; inbody = 0; body = ""; lead = 1
	delete lines; delete hval
}

# header TO: a baresip message from "from" to TO starts on the next line.
function header(to) {
	pending = 0
	begin(from == self || (" " peers " ") ~ (" " to " ") ? "sent" : "received")
}

{
	raw = $0
	sub(/\r$/, "")
	gsub(/\033\[[0-9;]*m/, "")
}

# SIPp: "UDP message sent (478 bytes):", "TCP message received [312] bytes :"
/^(UDP|TCP|TLS|SCTP) message (sent|received)/ {
	begin($3)
	next
}
# SIPp: the dashed line with a time stamp before each message.
/^-----------/ { flush(); next }
# baresip: "UDP 127.0.0.1:25075 -> 127.0.0.1:25060", the message after it,
# ended by the escape sequence that resets the colour. Another thread's log
# line can land inside that line ("UDP a -> aubridge: thread start ...",
# then "b" alone on the next line): the header then waits for its address.
/^(UDP|TCP|TLS) [^ ]+ -> / {
	from = $2
	if (NF == 4 && $4 ~ /:[0-9]+$/) { header($4); next }
	pending = 1
	next
}
pending && /^[^ ]+:[0-9]+$/ { header($0); next }
raw ~ /^\033\[;m/ { flush(); next }

inmsg {
	if (lead && $0 == "") next # SIPp leaves a blank line before the message
	lead = 0
	if (inbody) {
		if ($0 != "") body = body (body == "" ? "" : "|") $0
		next
	}
	if ($0 == "") { inbody = 1; next }
	lines[++nlines] = $0
	if (nlines > 1) {
		name = $0; sub(/[ \t]*:.*/, "", name); name = tolower(name)
		if (name in compact) name = compact[name]
		if (!(name in hval)) { value = $0; sub(/^[^:]*:[ \t]*/, "", value); hval[name] = value }
	}
}

END { flush() }
