# The interop flows' building blocks; sourced by flow.sh after
# bench/sipp/lib.sh (free ports, stop, start_sipedge, start_uas, the
# cleanup trap), not run.
#
# A flow (flows.sh) starts its parts in any order, each on free loopback
# ports: SIPp carriers (carrier), the gateways sipedge dials (gateway),
# Kamailio proxies (kamailio_up), sipedge (sipedge_up); then its caller,
# SIPp (caller) or baresip (baresip_call), which runs to its end. Then
# end_flow stops everything (sipedge last, which flushes its CDRs) and the
# flow checks what each side saw: the SIPp message traces (WORK/ROLE_msg.log),
# Kamailio's log lines (WORK/kam_NAME.log, kam_lines), baresip's SIP trace
# (WORK/baresip.log) and the CDR. Each failed check adds a reason (bad);
# verdict prints the flow's RESULT line.

INTEROP=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SCEN=$INTEROP/scenarios
KAMAILIO=${KAMAILIO:-kamailio}
BARESIP=${BARESIP:-baresip}

FLOW=
REASONS=()      # why the flow failed, one entry per failed check
GATEWAYS=()     # "name|host:port|udp or tcp", in the order sipedge tries them
CARRIER_PIDS=() # "role|pid" of the SIPp carriers
KAM_PIDS=
declare -A RC   # exit status per role: caller, each carrier, baresip

# bad REASON: the flow fails, for REASON.
bad() { REASONS+=("$*"); }

# flow_setup NAME: the flow's work directory, sipedge's binary (built
# once by run.sh) and its ports.
flow_setup() {
	FLOW=$1
	SIPP_LOGS=
	setup_work "$FLOW"
	trap interop_cleanup EXIT
	[ -x "${SIPEDGE_BIN:-}" ] || fail "SIPEDGE_BIN is not an executable sipedge (run.sh builds it)"
	ln -s "$SIPEDGE_BIN" "$WORK/sipedge"
	pick 1 SIP_PORT ADMIN_PORT
	TRANSPORT=udp SIPP_T=u1
}

# interop_cleanup: on exit, stop the proxies, then what bench/sipp/lib.sh's
# cleanup stops (SIPp, sipedge), which keeps WORK unless the flow passed.
interop_cleanup() {
	local p
	for p in $KAM_PIDS; do stop_kamailio "$p"; done
	cleanup
}

# sipp_t udp|tcp: SIPp's -t for a transport (one socket, as a phone has).
sipp_t() { [ "$1" = tcp ] && echo t1 || echo u1; }

# carrier ROLE SCENARIO [udp|tcp [SIPP_ARGS...]]: a SIPp carrier (UAS) for
# one call on free ports, tracing its messages to WORK/ROLE_msg.log; sets
# ROLE_PORT. It exits by itself once its call is over (-m 1).
carrier() {
	local role=$1 scen=$2 tr=${3:-udp} port cp mp
	shift 2
	[ $# -gt 0 ] && shift
	pick 1 port cp
	pick 4 mp
	TRANSPORT=$tr SIPP_T=$(sipp_t "$tr")
	start_uas "$role" "$port" "$cp" "$mp" -sf "$SCEN/$scen" -m 1 -default_behaviors abortunexp \
		-trace_msg -message_file "$WORK/${role}_msg.log" \
		-recv_timeout 8s -timeout 30s -timeout_error "$@"
	CARRIER_PIDS+=("$role|${UAS_PIDS##* }")
	printf -v "${role}_PORT" '%s' "$port"
	TRANSPORT=udp SIPP_T=u1
}

# gateway NAME HOST:PORT [udp|tcp]: a carrier sipedge dials, in order: the
# first gateway is the cheapest route, the next its failover.
gateway() { GATEWAYS+=("$1|$2|${3:-udp}"); }

# sipedge_up [LCR_YAML]: write sipedge's config (one trunk for 127.0.0.1,
# one gateway group and static route per gateway, LCR_YAML's lines in lcr)
# and start it; it answers on SIP_PORT (UDP and TCP).
sipedge_up() {
	local lcr_extra=${1:-} g name hp tr uri rate=1
	{
		cat <<-EOF
			listen: ["udp://127.0.0.1:$SIP_PORT", "tcp://127.0.0.1:$SIP_PORT"]
			admin: { listen: "127.0.0.1:$ADMIN_PORT" }
			log: { level: info, file: "$WORK/sipedge.log" }
			b2bua: { drain_timeout_secs: 2 }
			trunks:
			  - { name: customer, trunk_group: customer, sources: ["127.0.0.1/32"] }
			gateway:
			  groups:
		EOF
		for g in "${GATEWAYS[@]}"; do
			IFS='|' read -r name hp tr <<<"$g"
			uri="sip:$hp"
			[ "$tr" = tcp ] && uri+=";transport=tcp"
			echo "    - { name: $name, transport: $tr, destinations: [{ uri: \"$uri\", address: \"$hp\" }] }"
		done
		echo "lcr:"
		[ -n "$lcr_extra" ] && echo "$lcr_extra" | sed 's/^/  /'
		echo "  static_routes:"
		echo "    - prefix: \"\""
		echo "      routes:"
		for g in "${GATEWAYS[@]}"; do
			IFS='|' read -r name hp tr <<<"$g"
			echo "        - { carrier_id: $name, gateway_group: $name, rate: 0.00$rate, timeout_secs: 10 }"
			rate=$((rate + 1))
		done
		echo "cdr: { file: \"$WORK/cdr.jsonl\" }"
	} >"$WORK/sipedge.yaml"
	"$WORK/sipedge" check-config -config "$WORK/sipedge.yaml" >"$WORK/effective.yaml" 2>&1 ||
		fail "bad config: $(cat "$WORK/effective.yaml")"
	start_sipedge
}

# kamailio_up NAME NEXT_HOP [KAMAILIO_ARGS...]: Kamailio (kamailio/proxy.cfg)
# as proxy NAME on a free port, UDP and TCP, sending initial requests to
# NEXT_HOP (a SIP URI); sets NAME_PORT. Its log is WORK/kam_NAME.log.
kamailio_up() {
	local name=$1 next=$2 port pid i
	shift 2
	command -v "$KAMAILIO" >/dev/null || fail "kamailio not found (Debian package kamailio; make interop installs it)"
	pick 1 port
	# A process group of its own (setsid), so that stop_kamailio can end
	# its children too, should the main process not.
	setsid "$KAMAILIO" -DD -E -f "$INTEROP/kamailio/proxy.cfg" -w "$WORK" -m 32 -M 8 \
		-l "udp:127.0.0.1:$port" -l "tcp:127.0.0.1:$port" \
		-A "NAME=$name" -A "NEXT_HOP=\"$next\"" -A "DUMP_DIR=\"$WORK\"" -A "DUMP_PREFIX=\"kam_$name-\"" \
		"$@" >"$WORK/kam_$name.log" 2>&1 &
	pid=$!
	KAM_PIDS+=" $pid"
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || fail "kamailio $name exited: $(tail -5 "$WORK/kam_$name.log")"
		if ss -Hlun "sport = :$port" 2>/dev/null | grep -q . && ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
			printf -v "${name}_PORT" '%s' "$port"
			log "kamailio $name pid $pid on 127.0.0.1:$port -> $next"
			return 0
		fi
		sleep 0.1
	done
	fail "kamailio $name does not listen on $port"
}

# stop_kamailio PID: SIGTERM to Kamailio's main process, which stops its
# children; what is left of its process group after 5 s gets SIGKILL.
stop_kamailio() {
	stop "$1" 5
	kill -KILL -- "-$1" 2>/dev/null || true
}

# caller SCENARIO HOST:PORT [udp|tcp [SIPP_ARGS...]]: a SIPp caller (UAC)
# placing one call to number 1000 at HOST:PORT, to its end or 25 s;
# RC[caller] is its exit status, WORK/caller_msg.log what it saw. The
# scenarios' optional header lines, [route] and [rel], are empty unless
# SIPP_ARGS set them (-key route "Route: <sip:...;lr>").
caller() {
	local scen=$1 dest=$2 tr=${3:-udp} port cp mp key keys=
	shift 2
	[ $# -gt 0 ] && shift
	for key in route rel; do
		[[ " $* " == *" -key $key "* ]] || keys+=" $key"
	done
	for key in $keys; do set -- "$@" -key "$key" ""; done
	pick 1 port cp
	pick 4 mp
	CALLER_PORT=$port
	log "caller: $scen to $dest over $tr"
	RC[caller]=0
	(cd "$WORK" && exec timeout -s TERM -k 5 25 "$SIPP" "$dest" -sf "$SCEN/$scen" -t "$(sipp_t "$tr")" \
		-i 127.0.0.1 -p "$port" -mi 127.0.0.1 -mp "$mp" -cp "$cp" -s 1000 -m 1 -default_behaviors abortunexp -nostdin \
		-trace_msg -message_file "$WORK/caller_msg.log" \
		-trace_err -error_file "$WORK/caller_errors.log" \
		-recv_timeout 5s -timeout 20s -timeout_error "$@" \
		>"$WORK/caller.out" 2>&1) || RC[caller]=$?
}

# baresip_call URI SECONDS [udp|tcp]: baresip, headless, dials URI and
# quits after SECONDS (hanging up a call still up), in the foreground;
# RC[baresip] is its exit status, WORK/baresip.log its SIP trace. Sets
# BARESIP_ADDR, where it listens.
baresip_call() {
	local uri=$1 secs=$2 tr=${3:-udp} port dir=$WORK/baresip
	command -v "$BARESIP" >/dev/null || fail "baresip not found (Debian package baresip-core; make interop installs it)"
	pick 2 port # SIP over UDP and TCP on port, TLS on port+1
	pick 16 rtp
	mkdir -p "$dir"
	# No sound card: the aubridge module is both the audio source and the
	# player (what it plays it records), so media runs without a device.
	cat >"$dir/config" <<-EOF
		module_path		/usr/lib/baresip/modules
		poll_method		epoll
		net_interface		127.0.0.1
		sip_listen		127.0.0.1:$port
		sip_trans_def		$tr
		call_local_timeout	30
		call_max_calls		1
		audio_player		aubridge,interop
		audio_source		aubridge,interop
		audio_alert		aubridge,interop
		audio_level		no
		rtp_ports		$rtp-$((rtp + 15))
		module			g711.so
		module			aubridge.so
		module_app		account.so
		module_app		menu.so
	EOF
	echo "<sip:alice@127.0.0.1;transport=$tr>;regint=0" >"$dir/accounts"
	BARESIP_ADDR=127.0.0.1:$port
	log "baresip on $BARESIP_ADDR dials $uri for ${secs}s"
	RC[baresip]=0
	timeout -s TERM -k 5 $((secs + 10)) "$BARESIP" -f "$dir" -s -t "$secs" -e "/dial $uri" \
		>"$WORK/baresip.log" 2>&1 || RC[baresip]=$?
}

# carriers_done: wait up to 5 s for the SIPp carriers to end their call
# and exit; RC[ROLE] is each one's exit status (124: still running, stopped).
carriers_done() {
	local entry role pid i
	for entry in "${CARRIER_PIDS[@]}"; do
		IFS='|' read -r role pid <<<"$entry"
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			stop "$pid" 2
			RC[$role]=124
		else
			RC[$role]=0
			wait "$pid" 2>/dev/null || RC[$role]=$?
		fi
	done
	UAS_PIDS=
}

# end_flow: stop every part (carriers first, sipedge last: it flushes the CDRs).
end_flow() {
	local p
	carriers_done
	for p in $KAM_PIDS; do stop_kamailio "$p"; done
	KAM_PIDS=
	kill -0 "$SIPEDGE_PID" 2>/dev/null || bad "sipedge died: $(tail -3 "$WORK/sipedge.out" 2>/dev/null)"
	stop_sipedge
}

# sipp_error ROLE: the first line of ROLE's SIPp error trace that says
# why its call failed, shortened, or its exit status.
sipp_error() {
	local role=$1 line
	line=$(grep -h -m1 -E 'Aborting call|unexpected|timeout|Timeout|Regexp|regexp|check|Failed' \
		"$WORK/${role}_errors.log" 2>/dev/null | sed -E 's/^[0-9-]+[[:space:]]+[0-9:.]+[[:space:]]+[0-9.]+: //; s/Call-I[dD]: [^,]*, //; s/[[:space:]]+/ /g' | cut -c1-240)
	if [ -z "$line" ] && [ "${RC[$role]}" = 124 ]; then
		line="did not reach the end of its scenario (stopped)"
	fi
	echo "${line:-exit status ${RC[$role]}}"
}

# sipp_ok ROLE...: each SIPp ROLE ran its scenario to the end.
sipp_ok() {
	local role
	for role; do
		[ "${RC[$role]:-?}" = 0 ] || bad "$role: $(sipp_error "$role")"
	done
}

# msgs ROLE [AWK_VARS...]: what ROLE's trace holds (siplog.awk), e.g.
# msgs caller -v dir=received -v start='^SIP/2.0 487' -v hdr=To
msgs() {
	local role=$1 file
	shift
	file=$WORK/${role}_msg.log
	if [ "$role" = baresip ]; then
		file=$WORK/baresip.log
		set -- -v self="$BARESIP_ADDR" -v peers="127.0.0.1:$SIP_PORT${customer_PORT:+ 127.0.0.1:$customer_PORT}" "$@"
	fi
	awk -f "$INTEROP/siplog.awk" "$@" "$file" 2>/dev/null
}

# kam_lines NAME FIELD_REGEX...: Kamailio NAME's log lines (fields after
# "KAM|NAME|") matching every extended regular expression.
kam_lines() {
	local name=$1 re lines
	shift
	lines=$(grep -ao "KAM|$name|.*" "$WORK/kam_$name.log" 2>/dev/null | cut -d'|' -f3-)
	for re; do lines=$(grep -E -- "$re" <<<"$lines" || true); done
	[ -n "$lines" ] && echo "$lines"
	return 0
}

# expect_lines WHAT REGEX... < LINES: there are as many lines as REGEXes,
# line i matching (extended) REGEX i; WHAT names them in the reasons.
expect_lines() {
	local what=$1 line i=0 n
	shift
	local want=("$@")
	n=${#want[@]}
	while IFS= read -r line; do
		if [ "$i" -lt "$n" ] && ! grep -qE -- "${want[$i]}" <<<"$line"; then
			bad "$what #$((i + 1)) is '$(cut -c1-120 <<<"$line")', want /${want[$i]}/"
		fi
		i=$((i + 1))
	done
	[ "$i" -eq "$n" ] || bad "$what: $i seen, want $n"
}

# tag HEADER_VALUE: the tag parameter of a From or To value.
tag() { sed -nE 's/.*;[[:space:]]*tag=([^;>[:space:]]+).*/\1/p' <<<"$1"; }

# cdr_field FIELD: FIELD's value in the flow's first CDR ("" if none),
# a field of the call, not of its lcr_attempts.
cdr_field() {
	head -1 "$WORK/cdr.jsonl" 2>/dev/null | sed -E 's/"lcr_attempts":\[[^]]*\]//' |
		sed -nE "s/.*\"$1\":(\"[^\"]*\"|[^,}]*).*/\1/p" | tr -d '"'
}

# expect_cdr FIELD VALUE: the flow's one CDR says FIELD is VALUE.
expect_cdr() {
	local n got
	n=$(grep -c . "$WORK/cdr.jsonl" 2>/dev/null || true)
	[ "${n:-0}" = 1 ] || { bad "sipedge wrote ${n:-0} CDRs, want 1"; return; }
	got=$(cdr_field "$1")
	[ "$got" = "$2" ] || bad "CDR $1 is '$got', want '$2'"
}

# verdict: the flow's RESULT line, which run.sh reads: PASS, or FAIL and
# its reasons; exit status 0 either way, once the flow ran.
verdict() {
	local r
	if [ ${#REASONS[@]} -eq 0 ]; then
		OK=1
		echo "RESULT PASS"
	else
		printf -v r '%s; ' "${REASONS[@]}"
		echo "RESULT FAIL ${r%; }"
	fi
	exit 0
}
