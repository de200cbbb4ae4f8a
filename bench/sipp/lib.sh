# Shared by bench/sipp/run.sh, failover.sh and auth.sh; sourced, not run.
#
# The sourcing script sets RATE, CALLS, UAC_TIMEOUT, LIMIT (the UAC's
# simultaneous calls cap), TRANSPORT (udp|tcp), SIPP_T (SIPp's -t: u1|t1)
# (udp_calls sets them all for a UDP scenario) and SIPP_LOGS (the SIPp file prefixes in WORK that cleanup names), calls
# setup_work, picks its ports with pick (SIP_PORT, ADMIN_PORT, UAC_PORT,
# UAC_CP, UAC_MP and its own), then build_sipedge, write_config,
# start_sipedge, start_uas, run_uac, read_uac_stats, and at the end finish,
# which calls the script's dump_errors on failure. UAC_ARGS (an array,
# default -sn uac) is the UAC's scenario and any other SIPp arguments of
# its own; SIPP_PREFIX (an array, default empty) is put before every SIPp
# command, e.g. (nice -n 5).

SIPP=${SIPP:-sipp}
UAC_ARGS=(-sn uac)
SIPP_PREFIX=()
GO=${GO:-go}
NAME=${0##*/}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=
OK=0
SIPEDGE_PID=
UAS_PIDS=
UAC_PID=
UAC_RC=0
USED=
PICKED=" "

# udp_calls DEFAULT_CALLS "$@": the [CALLS [RATE]] arguments of a scenario
# script (RATE default 10), and the UDP run settings they imply; a usage
# line and exit 2 on bad arguments.
udp_calls() {
	local default=$1
	shift
	if [ $# -gt 2 ] || ! [[ ${1:-$default} =~ ^[1-9][0-9]*$ && ${2:-10} =~ ^[1-9][0-9]*$ ]]; then
		echo "usage: $0 [CALLS [RATE]]" >&2
		exit 2
	fi
	CALLS=${1:-$default}
	RATE=${2:-10}
	TRANSPORT=udp
	SIPP_T=u1
	LIMIT=$((RATE * 4 > 200 ? RATE * 4 : 200))
	UAC_TIMEOUT=$((CALLS / RATE + 30))
}

# log MSG...: print MSG on stderr, prefixed with the script's name.
log() { echo "$NAME: $*" >&2; }

# fail MSG...: log MSG and exit 1 (cleanup keeps WORK).
fail() {
	log "$*"
	exit 1
}

# num VALUE: VALUE is a non-negative integer (sipp_stat prints "?" otherwise).
num() { [[ $1 =~ ^[0-9]+$ ]]; }

# stop PID [GRACE]: SIGTERM, wait up to GRACE (10) seconds, then SIGKILL.
stop() {
	local pid=$1 grace=${2:-10} i
	[ -n "$pid" ] || return 0
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < grace * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid did not stop on SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# wait_uas: give the UAS that exit by themselves (-m) 5 s to finish their
# last calls, then stop those left.
wait_uas() {
	local i pid up
	for ((i = 0; i < 50; i++)); do
		up=
		for pid in $UAS_PIDS; do kill -0 "$pid" 2>/dev/null && up=1; done
		[ -n "$up" ] || break
		sleep 0.1
	done
	stop_uas
}

# stop_uas: stop every SIPp UAS still running.
stop_uas() {
	local pid
	for pid in $UAS_PIDS; do stop "$pid" 5; done
	UAS_PIDS=
}

# stop_sipedge: SIGTERM sipedge and give it time to drain and flush its CDRs.
stop_sipedge() {
	stop "$SIPEDGE_PID" 40
	SIPEDGE_PID=
}

# cleanup: on exit, stop what still runs; remove WORK on success unless KEEP.
cleanup() {
	local p files=
	stop "$UAC_PID" 5
	stop_uas
	stop_sipedge
	if [ "$OK" = 1 ] && [ -z "${KEEP:-}" ]; then
		rm -rf "$WORK"
	elif [ "$OK" = 1 ]; then
		log "KEEP set; files kept in $WORK"
	else
		log "FAILED; files kept in $WORK"
		for p in $SIPP_LOGS; do files+=" $WORK/${p}_*"; done
		echo "  sipedge log: $WORK/sipedge.log  CDRs: $WORK/cdr.jsonl" >&2
		echo "  SIPp:$files" >&2
	fi
}

# setup_work PREFIX: make WORK, arm the cleanup trap and check the tools.
setup_work() {
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	command -v "$SIPP" >/dev/null || fail "sipp not found (Debian package sip-tester)"
	command -v curl >/dev/null || fail "curl not found"
}

# port_free P N: ports P..P+N-1 are neither in use nor picked already.
port_free() {
	local i
	for ((i = 0; i < $2; i++)); do
		case "$USED$PICKED" in *" $(($1 + i)) "*) return 1 ;; esac
	done
}

# pick N VAR...: set each VAR to a random port P with P..P+N-1 free, P
# from PICK_FROM (20000) up to PICK_FROM+PICK_SPAN (40000), excluded.
pick() {
	local n=$1 var p i tries
	shift
	# Ports in use right now (TCP and UDP, listening or not).
	[ -n "$USED" ] || USED=" $(ss -Hantu 2>/dev/null | awk '{n = split($5, a, ":"); print a[n]}' | sort -un | tr '\n' ' ') "
	for var; do
		for ((tries = 0; tries < 1000; tries++)); do
			p=$((${PICK_FROM:-20000} + (RANDOM * 32768 + RANDOM) % ${PICK_SPAN:-40000}))
			port_free "$p" "$n" && break
		done
		port_free "$p" "$n" || fail "no free port found"
		for ((i = 0; i < n; i++)); do PICKED+="$((p + i)) "; done
		printf -v "$var" '%s' "$p"
	done
}

# build_sipedge: go build ./cmd/sipedge into WORK.
build_sipedge() {
	log "building sipedge into $WORK"
	(cd "$REPO" && "$GO" build -o "$WORK/sipedge" ./cmd/sipedge) || fail "go build failed"
}

# write_config < GATEWAY_AND_LCR_YAML: write and check WORK/sipedge.yaml.
write_config() {
	{
		cat <<-EOF
			listen: ["udp://127.0.0.1:$SIP_PORT", "tcp://127.0.0.1:$SIP_PORT"]
			admin: { listen: "127.0.0.1:$ADMIN_PORT" }
			log: { level: info, file: "$WORK/sipedge.log" }
			b2bua: { drain_timeout_secs: 10 }
			trunks:
			  - { name: sipp, trunk_group: sipp-trunks, sources: ["127.0.0.1/32"] }
		EOF
		[ -z "${SHARDS:-}" ] || echo "shards: $SHARDS"
		if [ -n "${BATCH_US:-}${BATCH_MAX_US:-}" ]; then
			echo "sip:"
			[ -z "${BATCH_US:-}" ] || echo "  batch_interval_us: $BATCH_US"
			[ -z "${BATCH_MAX_US:-}" ] || echo "  batch_interval_max_us: $BATCH_MAX_US"
		fi
		cat
		echo "cdr: { file: \"$WORK/cdr.jsonl\" }"
	} >"$WORK/sipedge.yaml"
	"$WORK/sipedge" check-config -config "$WORK/sipedge.yaml" >"$WORK/effective.yaml" 2>&1 ||
		fail "bad config: $(cat "$WORK/effective.yaml")"
}

# start_sipedge: run sipedge in the background and wait for its /readyz.
start_sipedge() {
	local i
	"$WORK/sipedge" run -config "$WORK/sipedge.yaml" >"$WORK/sipedge.out" 2>&1 &
	SIPEDGE_PID=$!
	for ((i = 0; i < 100; i++)); do
		kill -0 "$SIPEDGE_PID" 2>/dev/null || break
		if curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$ADMIN_PORT/readyz" 2>/dev/null; then
			log "sipedge pid $SIPEDGE_PID ready: SIP $TRANSPORT 127.0.0.1:$SIP_PORT, admin 127.0.0.1:$ADMIN_PORT"
			return 0
		fi
		sleep 0.1
	done
	cat "$WORK/sipedge.out" "$WORK/sipedge.log" >&2 2>/dev/null || true
	fail "sipedge did not become ready on 127.0.0.1:$ADMIN_PORT"
}

# start_uas PREFIX PORT CP MP SIPP_ARGS...: start a SIPp UAS (files WORK/PREFIX*) and wait until it listens.
start_uas() {
	local prefix=$1 port=$2 cp=$3 mp=$4 pid i proto=u
	shift 4
	(cd "$WORK" && exec "${SIPP_PREFIX[@]}" "$SIPP" "$@" -t "$SIPP_T" -i 127.0.0.1 -p "$port" \
		-mi 127.0.0.1 -mp "$mp" -cp "$cp" -nostdin \
		-trace_err -error_file "$WORK/${prefix}_errors.log" \
		-trace_screen -screen_file "$WORK/${prefix}_screen.log" \
		>"$WORK/$prefix.out" 2>&1) &
	pid=$!
	UAS_PIDS+=" $pid"
	[ "$TRANSPORT" = tcp ] && proto=t
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || fail "SIPp $prefix exited: $(tail -5 "$WORK/$prefix.out")"
		ss -Hl${proto}n "sport = :$port" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	fail "SIPp $prefix does not listen on $port"
}

# run_uac: place CALLS calls at RATE/s through sipedge; sets UAC_RC and ELAPSED.
run_uac() {
	local t0 t1
	t0=$(date +%s.%N)
	(cd "$WORK" && exec timeout -s TERM -k 5 $((UAC_TIMEOUT + 5)) \
		"${SIPP_PREFIX[@]}" "$SIPP" "${UAC_ARGS[@]}" "127.0.0.1:$SIP_PORT" -t "$SIPP_T" -i 127.0.0.1 -p "$UAC_PORT" \
		-mi 127.0.0.1 -mp "$UAC_MP" -cp "$UAC_CP" \
		-r "$RATE" -m "$CALLS" -l "$LIMIT" -nostdin \
		-timeout "${UAC_TIMEOUT}s" -timeout_error \
		-trace_stat -stf "$WORK/uac_stat.csv" -fd 1 \
		-trace_screen -screen_file "$WORK/uac_screen.log" \
		-trace_err -error_file "$WORK/uac_errors.log" \
		>"$WORK/uac.out" 2>&1) &
	UAC_PID=$!
	UAC_RC=0
	wait "$UAC_PID" || UAC_RC=$?
	UAC_PID=
	t1=$(date +%s.%N)
	ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
}

# sipp_stat FILE COLUMN: the last (final, cumulative) value of a SIPp statistics column, or "?".
sipp_stat() {
	awk -F';' -v col="$2" '
		NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
		{ last = $c }
		END { if (c == "" || last == "") print "?"; else print last + 0 }
	' "$1" 2>/dev/null || echo "?"
}

# read_uac_stats: set ATTEMPTED, SUCCEEDED and FAILED from the UAC's final statistics.
read_uac_stats() {
	ATTEMPTED=$(sipp_stat "$WORK/uac_stat.csv" 'TotalCallCreated')
	SUCCEEDED=$(sipp_stat "$WORK/uac_stat.csv" 'SuccessfulCall(C)')
	FAILED=$(sipp_stat "$WORK/uac_stat.csv" 'FailedCall(C)')
}

# cdr_count REGEX...: the number of CDR lines matching every extended REGEX
# (a pipe of greps: a soak's 100,000 CDRs held in a variable take bash
# seconds per regex).
cdr_count() {
	local re cmd='cat "$WORK/cdr.jsonl" 2>/dev/null'
	for re; do cmd+=" | grep -E -- $(printf '%q' "$re")"; done
	eval "$cmd" | grep -c . || true
}

# all_calls_ok: the UAC attempted CALLS calls and every one succeeded
# (read_uac_stats); each shortfall is logged.
all_calls_ok() {
	local ok=0
	[ "$ATTEMPTED" -eq "$CALLS" ] || { log "FAIL: $ATTEMPTED calls attempted, want $CALLS"; ok=1; }
	[ "$FAILED" -eq 0 ] || { log "FAIL: $FAILED calls failed"; ok=1; }
	[ "$SUCCEEDED" -eq "$CALLS" ] || { log "FAIL: $SUCCEEDED of $CALLS calls succeeded"; ok=1; }
	return $ok
}

# dump_sipp_errors: show the first lines of every SIPp error log and the
# first CDRs of calls that did not end 200 (a scenario script's dump_errors).
dump_sipp_errors() {
	local f
	for f in "$WORK"/*_errors.log; do
		if [ -s "$f" ]; then
			log "first lines of ${f##*/}:"
			head -20 "$f" >&2
		fi
	done
	grep -vE '"final_code":200[,}]' "$WORK/cdr.jsonl" 2>/dev/null | head -3 >&2 || true
}

# finish BAD: exit 0, or 1 (after dump_errors and sipedge's warnings) if BAD or the UAC failed.
finish() {
	local bad=$1
	if [ "$UAC_RC" -ne 0 ] && [ "$bad" = 0 ]; then
		log "FAIL: SIPp UAC exit status $UAC_RC"
		tail -20 "$WORK/uac.out" >&2 || true
		bad=1
	fi
	if [ "$bad" != 0 ]; then
		dump_errors
		grep -E 'level=(WARN|ERROR)' "$WORK/sipedge.log" 2>/dev/null | head -20 >&2 || true
		exit 1
	fi
	OK=1
	exit 0
}
