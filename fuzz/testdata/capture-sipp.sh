#!/bin/sh
# capture-sipp.sh regenerates the sipp-* seed corpus files under
# fuzz/testdata/fuzz/ from real SIPp traffic: a SIPp UAS (the built-in uas
# scenario plus a 100 Trying) and the built-in SIPp UAC place a few calls on
# loopback, once over UDP and once over TCP, with -trace_msg; sippcorpus.go
# cuts the message logs into go test fuzz corpus files.
#
# Usage: fuzz/testdata/capture-sipp.sh   (needs sipp and go; ports 5091-5094)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
calls=${CALLS:-3}
work=$(mktemp -d)
uas=
cleanup() {
	# Only the UAS this script started, by its id.
	if [ -n "$uas" ]; then kill "$uas" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

cat >"$work/uas.xml" <<'XML'
<?xml version="1.0" encoding="ISO-8859-1" ?>
<!DOCTYPE scenario SYSTEM "sipp.dtd">
<!-- SIPp's built-in uas scenario with a 100 Trying before the 180. -->
<scenario name="UAS with 100 Trying">
  <recv request="INVITE" crlf="true"/>
  <send>
    <![CDATA[
      SIP/2.0 100 Trying
      [last_Via:]
      [last_From:]
      [last_To:]
      [last_Call-ID:]
      [last_CSeq:]
      Content-Length: 0
    ]]>
  </send>
  <send>
    <![CDATA[
      SIP/2.0 180 Ringing
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:[local_ip]:[local_port];transport=[transport]>
      Content-Length: 0
    ]]>
  </send>
  <send retrans="500">
    <![CDATA[
      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:[local_ip]:[local_port];transport=[transport]>
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 0
      a=rtpmap:0 PCMU/8000
    ]]>
  </send>
  <recv request="ACK" optional="true" rtd="true" crlf="true"/>
  <recv request="BYE"/>
  <send>
    <![CDATA[
      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:[local_ip]:[local_port];transport=[transport]>
      Content-Length: 0
    ]]>
  </send>
  <timewait milliseconds="500"/>
</scenario>
XML

# capture NAME TRANSPORT UAS_PORT UAC_PORT runs $calls calls and leaves the
# UAC's message log (it holds both directions) in $work/NAME.log.
capture() {
	name=$1 transport=$2 uasport=$3 uacport=$4
	sipp -sf "$work/uas.xml" -t "$transport" -i 127.0.0.1 -p "$uasport" \
		-m "$calls" -timeout 30s -nostdin \
		-trace_msg -message_file "$work/$name-uas.log" \
		</dev/null >"$work/$name-uas.out" 2>&1 &
	uas=$!
	sleep 1
	if ! sipp -sn uac -t "$transport" "127.0.0.1:$uasport" -i 127.0.0.1 -p "$uacport" \
		-m "$calls" -r "$calls" -timeout 30s -timeout_error -nostdin \
		-trace_msg -message_file "$work/$name.log" \
		</dev/null >"$work/$name-uac.out" 2>&1; then
		echo "capture-sipp: $name UAC failed" >&2
		cat "$work/$name-uac.out" >&2
		exit 1
	fi
	# The UAC judged the calls. Over TCP the UAS may count its last call
	# failed when the UAC closes the connection during the time-wait.
	wait "$uas" || true
	uas=
}

capture udp u1 5092 5091
capture tcp t1 5094 5093

rm -f "$here"/fuzz/Fuzz*/sipp-*
cd "$here"
go run sippcorpus.go -out "$here/fuzz" "$work/udp.log" "$work/tcp.log"
