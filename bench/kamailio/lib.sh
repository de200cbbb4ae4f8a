# Kamailio for bench/sipp/capacity.sh; sourced after bench/sipp/lib.sh, not
# run. kamailio.cfg beside this file is the template.
#
#   write_kamailio_config PORT CHILDREN FIRST_MS DEST...  WORK/kamailio.cfg
#       listening on 127.0.0.1:PORT (UDP) with CHILDREN worker processes,
#       giving the first carrier FIRST_MS ms to answer (0: the defaults,
#       32 s for a response and 30 s of ringing, as sipedge's), and the
#       dispatcher list WORK/dispatcher.list: set 1 with each DEST
#       (host:port) in the order given, tried in that order
#   start_kamailio                               run it (KAMAILIO_PID), wait until it listens
#   stop_kamailio                                SIGTERM and wait

KAMAILIO=${KAMAILIO:-kamailio}
KAMAILIO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KAMAILIO_PID=
KAMAILIO_PORT=
# Shared memory (MB) for the transactions: at 3,000 calls/s tm keeps
# about 15,000 (each lingers 5 s after its final response), several KB each.
KAMAILIO_SHM_MB=${KAMAILIO_SHM_MB:-512}

# need_kamailio: install Debian's kamailio when it is missing.
need_kamailio() {
	command -v "$KAMAILIO" >/dev/null && return 0
	log "installing kamailio (Debian package)"
	local sudo=
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kamailio >/dev/null ||
		fail "cannot install kamailio"
	command -v "$KAMAILIO" >/dev/null || fail "kamailio not found after installing it"
}

write_kamailio_config() {
	local port=$1 children=$2 first=$3 prio dest
	shift 3
	KAMAILIO_PORT=$port
	# Algorithm 8 tries the destinations by priority, the highest first.
	prio=$(($# * 10))
	: >"$WORK/dispatcher.list"
	for dest; do
		echo "1 sip:$dest 0 $prio" >>"$WORK/dispatcher.list"
		prio=$((prio - 10))
	done
	sed -e "s|@SIP_PORT@|$port|g" -e "s|@CHILDREN@|$children|g" -e "s|@FIRST_TIMEOUT_MS@|$first|g" \
		-e "s|@DISPATCHER_LIST@|$WORK/dispatcher.list|g" \
		"$KAMAILIO_DIR/kamailio.cfg" >"$WORK/kamailio.cfg"
	"$KAMAILIO" -c -f "$WORK/kamailio.cfg" >"$WORK/kamailio-check.out" 2>&1 ||
		fail "bad kamailio config: $(tail -5 "$WORK/kamailio-check.out")"
}

start_kamailio() {
	local i
	# -DD: stay in the foreground with the worker processes as children;
	# -E: log to stderr; -Y: runtime files in WORK.
	"$KAMAILIO" -f "$WORK/kamailio.cfg" -DD -E -m "$KAMAILIO_SHM_MB" -M 16 -Y "$WORK" \
		-P "$WORK/kamailio.pid" >"$WORK/kamailio.log" 2>&1 &
	KAMAILIO_PID=$!
	for ((i = 0; i < 100; i++)); do
		kill -0 "$KAMAILIO_PID" 2>/dev/null || break
		if ss -Hlun "sport = :$KAMAILIO_PORT" 2>/dev/null | grep -q .; then
			log "kamailio pid $KAMAILIO_PID ready: SIP udp 127.0.0.1:$KAMAILIO_PORT"
			return 0
		fi
		sleep 0.1
	done
	tail -20 "$WORK/kamailio.log" >&2 || true
	fail "kamailio did not listen on 127.0.0.1:$KAMAILIO_PORT"
}

stop_kamailio() {
	stop "$KAMAILIO_PID" 10
	KAMAILIO_PID=
}
