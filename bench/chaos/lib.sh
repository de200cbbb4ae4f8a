# The fault campaign's building blocks; sourced by fault.sh after
# bench/sipp/lib.sh (free ports, stop, start_sipedge, start_uas, the SIPp
# statistics readers, the cleanup trap), not run.
#
# A fault (faults.sh) writes sipedge's config (sipedge_config), starts its
# parts on free loopback ports: SIPp carriers (carrier), the routing API
# stub (stub_start), redis-server (redis_start), sipedge (sipedge_up); then
# its callers (caller_start, caller_wait) while it injects the fault; then
# stops sipedge (sipedge_down: SIGTERM, which flushes the CDRs) and checks
# what each side saw with expect. verdict prints the fault's row: the
# RESULT line run.sh reads, and the NOTE lines it shows beside it.

CHAOS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python3}
REDIS_SERVER=${REDIS_SERVER:-redis-server}

FAULT=
REASONS=()   # the expectations that failed, one entry each
NOTES=()     # figures shown beside the row
STUB_PID=
REDIS_PID=
OFFERED=? ANSWERED=? FAILED=? MAX_WAIT_MS=?
SIPEDGE_RC=
SIPEDGE_STOP_SECS=
SIPEDGE_EXIT_AT=
CHECK_STOP=1 # verdict expects sipedge to have stopped by itself on SIGTERM, exit 0

# bad REASON: an expectation failed.
bad() { REASONS+=("$*"); }

# note TEXT: a figure for the row's notes.
note() { NOTES+=("$*"); }

# expect DESCRIPTION CONDITION: evaluate CONDITION, a shell condition in
# single quotes ('[ "$FAILED" = 0 ] && ...'); if it is false (or cannot be
# evaluated: a figure is "?"), DESCRIPTION is a failed expectation.
expect() {
	eval "$2" 2>/dev/null || bad "$1"
}

# now: the Unix time with milliseconds, as a decimal.
now() { date +%s.%N | cut -c1-14; }

# secs_since T: seconds since T (a now), one decimal.
secs_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# chaos_setup NAME: the fault's work directory, sipedge's binary (built
# once by run.sh, SIPEDGE_BIN, or here when fault.sh runs alone) and its
# SIP and admin ports.
chaos_setup() {
	FAULT=$1
	SIPP_LOGS=
	setup_work "chaos-$1"
	trap chaos_cleanup EXIT
	if [ -n "${SIPEDGE_BIN:-}" ]; then
		[ -x "$SIPEDGE_BIN" ] || fail "SIPEDGE_BIN $SIPEDGE_BIN is not an executable"
		ln -s "$SIPEDGE_BIN" "$WORK/sipedge"
	else
		build_sipedge
	fi
	pick 1 SIP_PORT ADMIN_PORT
	TRANSPORT=udp SIPP_T=u1
}

# chaos_cleanup: on exit, stop what the fault started, then lib.sh's
# cleanup (SIPp carriers, sipedge; WORK removed when the fault passed).
chaos_cleanup() {
	local p
	for p in "${CALLER_PID[@]}" $STUB_PID; do stop "$p" 5; done
	if [ -n "$REDIS_PID" ]; then
		kill -CONT "$REDIS_PID" 2>/dev/null || true
		stop "$REDIS_PID" 5
	fi
	cleanup
}

# sipedge_config < YAML: WORK/sipedge.yaml, the fault's YAML (gateway, lcr,
# sip, ratelimit, cache sections) between a head and the CDR file: SIP on
# SIP_PORT (UDP and TCP), the admin API on ADMIN_PORT, the log file, one
# trunk for 127.0.0.1/32, b2bua with drain_timeout_secs DRAIN_SECS (10)
# and B2BUA's settings. Checked with check-config.
sipedge_config() {
	{
		cat <<-EOF
			listen: ["udp://127.0.0.1:$SIP_PORT", "tcp://127.0.0.1:$SIP_PORT"]
			admin: { listen: "127.0.0.1:$ADMIN_PORT" }
			log: { level: info, file: "$WORK/sipedge.log" }
			b2bua: { drain_timeout_secs: ${DRAIN_SECS:-10}${B2BUA:+, $B2BUA} }
			trunks:
			  - { name: sipp, trunk_group: sipp-trunks, sources: ["127.0.0.1/32"] }
		EOF
		cat
		echo "cdr: { file: \"$WORK/cdr.jsonl\" }"
	} >"$WORK/sipedge.yaml"
	"$WORK/sipedge" check-config -config "$WORK/sipedge.yaml" >"$WORK/effective.yaml" 2>&1 ||
		fail "bad config: $(cat "$WORK/effective.yaml")"
}

# sipedge_up: start sipedge (lib.sh) and wait for /readyz.
sipedge_up() { start_sipedge; }

# sipedge_down [GRACE]: SIGTERM sipedge and wait up to GRACE (40) seconds
# for it to drain and exit; sets SIPEDGE_RC (its exit status, or "killed"
# when it had to be) and SIPEDGE_STOP_SECS.
sipedge_down() {
	local grace=${1:-40} t0
	[ -n "$SIPEDGE_PID" ] || return 0
	t0=$(now)
	kill -TERM "$SIPEDGE_PID" 2>/dev/null || true
	sipedge_wait "$grace" "$t0"
}

# sipedge_wait GRACE T0: wait up to GRACE seconds for sipedge to exit
# (then SIGKILL it); sets SIPEDGE_RC, SIPEDGE_STOP_SECS (since T0) and
# SIPEDGE_EXIT_AT (a now: when it was seen gone, within 50 ms).
sipedge_wait() {
	local grace=$1 t0=$2 i
	for ((i = 0; i < grace * 20; i++)); do
		kill -0 "$SIPEDGE_PID" 2>/dev/null || break
		sleep 0.05
	done
	SIPEDGE_EXIT_AT=$(now)
	SIPEDGE_STOP_SECS=$(secs_since "$t0")
	if kill -0 "$SIPEDGE_PID" 2>/dev/null; then
		kill -KILL "$SIPEDGE_PID" 2>/dev/null || true
		wait "$SIPEDGE_PID" 2>/dev/null || true
		SIPEDGE_RC=killed
	else
		SIPEDGE_RC=0
		wait "$SIPEDGE_PID" 2>/dev/null || SIPEDGE_RC=$?
	fi
	SIPEDGE_PID=
}

# alive: sipedge still runs.
alive() { [ -n "$SIPEDGE_PID" ] && kill -0 "$SIPEDGE_PID" 2>/dev/null; }

# scrape FILE: sipedge's /metrics into WORK/FILE (empty if unreachable).
scrape() { curl -fsS --max-time 5 -o "$WORK/$1" "http://127.0.0.1:$ADMIN_PORT/metrics" 2>/dev/null || : >"$WORK/$1"; }

# metric FILE NAME [LABEL_REGEX]: NAME summed over its label sets (those
# matching LABEL_REGEX) in WORK/FILE, or "?" if absent.
metric() {
	awk -v name="$2" -v re="${3:-}" '
		($1 == name || index($1, name "{") == 1) && $1 ~ re { n += $NF; seen = 1 }
		END { if (seen) printf "%.0f\n", n; else print "?" }
	' "$WORK/$1" 2>/dev/null || echo "?"
}

# carrier ROLE SCENARIO [SIPP_ARGS...]: a SIPp UAS on free ports playing a
# carrier (SCENARIO: a file, or "-sn uas"), its statistics in
# WORK/ROLE_stat.csv and its per-message counts (-trace_counts) in
# WORK/*_counts.csv; sets ROLE_PORT (ROLE upper-cased).
carrier() {
	local role=$1 scen=$2 port cp mp var
	shift 2
	pick 1 port cp
	pick 4 mp
	var=${role^^}_PORT
	printf -v "$var" '%s' "$port"
	SIPP_LOGS+=" $role"
	if [ "$scen" = uas ]; then
		set -- -sn uas "$@"
	else
		set -- -sf "$scen" "$@"
	fi
	start_uas "$role" "$port" "$cp" "$mp" "$@" -trace_stat -stf "$WORK/${role}_stat.csv" -fd 1 -trace_counts
	CARRIER_PID[$role]=${UAS_PIDS##* }
}
declare -A CARRIER_PID CALLER_PID

# caller_start ROLE SCENARIO CALLS RATE [SIPP_ARGS...]: a SIPp UAC placing
# CALLS calls at RATE/s through sipedge in the background (SCENARIO a file
# in bench/chaos, e.g. uac_call.xml), at most LIMIT (RATE*4, 200 at least)
# at once, each call's response time in WORK/ROLE_rtt.csv.
caller_start() {
	local role=$1 scen=$2 calls=$3 rate=$4 port cp mp limit
	shift 4
	pick 1 port cp
	pick 4 mp
	limit=$((rate * 4 > 200 ? rate * 4 : 200))
	SIPP_LOGS+=" $role"
	mkdir -p "$WORK/$role"
	(cd "$WORK/$role" && exec timeout -s TERM -k 5 $((calls / rate + ${CALLER_SLACK:-40})) \
		"$SIPP" -sf "$CHAOS/$scen" "127.0.0.1:$SIP_PORT" -t "$SIPP_T" -i 127.0.0.1 -p "$port" \
		-mi 127.0.0.1 -mp "$mp" -cp "$cp" -s 12025550123 \
		-r "$rate" -m "$calls" -l "$limit" -nostdin "$@" \
		-trace_stat -stf "$WORK/${role}_stat.csv" -fd 1 \
		-trace_rtt -rtt_freq 1 -trace_counts \
		-trace_screen -screen_file "$WORK/${role}_screen.log" \
		-trace_err -error_file "$WORK/${role}_errors.log" \
		>"$WORK/$role.out" 2>&1) &
	CALLER_PID[$role]=$!
}

# caller_wait ROLE: wait for the caller to end; sets OFFERED (SIPp's calls
# created), ANSWERED (calls that got a 200 to their INVITE), FAILED (the
# others), REFUSED (calls that got a final failure), BROKEN (SIPp's
# FailedCall: no final response, an unexpected message) and MAX_WAIT_MS,
# the longest response time 1 (uac_call.xml), or "?" without one.
caller_wait() {
	local role=$1 rc=0
	wait "${CALLER_PID[$role]}" || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 1 ] || note "$role: SIPp exit status $rc"
	OFFERED=$(sipp_stat "$WORK/${role}_stat.csv" 'TotalCallCreated')
	BROKEN=$(sipp_stat "$WORK/${role}_stat.csv" 'FailedCall(C)')
	ANSWERED=$(counts "$role" '^[0-9]+_200_Recv$')
	REFUSED=$(counts_sum "$role" '^[0-9]+_[3-6][0-9][0-9]_Recv$')
	FAILED=?
	num "$OFFERED" && num "$ANSWERED" && FAILED=$((OFFERED - ANSWERED))
	MAX_WAIT_MS=$(cat "$WORK/$role"/*_rtt.csv 2>/dev/null | awk -F';' '
		$2 ~ /^[0-9.]+$/ { seen = 1; if ($2 + 0 > m) m = $2 + 0 }
		END { if (seen) printf "%.0f\n", m; else print "?" }')
	[ "$BROKEN" = 0 ] || note "$role: $BROKEN calls broken (no final response or an unexpected message: ${role}_errors.log)"
}

# counts ROLE COLUMN_REGEX: the final value of the -trace_counts column of
# ROLE's SIPp whose name matches COLUMN_REGEX (e.g. '^[0-9]+_BYE_Recv$';
# the first such column), or "?".
counts() {
	local f
	f=$(counts_file "$1") || { echo "?"; return 0; }
	awk -F';' -v re="$2" '
		NR == 1 { for (i = 1; i <= NF; i++) if (c == "" && $i ~ re) c = i; next }
		{ last = $c }
		END { if (c == "" || last == "") print "?"; else print last + 0 }
	' "$f"
}

# counts_file ROLE: the -trace_counts file of ROLE's SIPp (a caller writes
# in WORK/ROLE/, a carrier's is named after its pid).
counts_file() {
	local f pid=${CARRIER_PID[$1]:-${CALLER_PID[$1]:-}}
	for f in "$WORK/$1"/*_counts.csv "$WORK"/*_"$pid"_counts.csv; do
		[ -f "$f" ] && { echo "$f"; return 0; }
	done
	return 1
}

# counts_sum ROLE COLUMN_REGEX: the sum of the final values of the
# -trace_counts columns whose names match COLUMN_REGEX, or "?".
counts_sum() {
	local f
	f=$(counts_file "$1") || { echo "?"; return 0; }
	awk -F';' -v re="$2" '
		NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ re) c[i] = 1; next }
		{ n = 0; for (i in c) n += $i }
		END { if (NR < 2) print "?"; else print n + 0 }
	' "$f"
}

# carrier_stat ROLE COLUMN: a column of the carrier's final SIPp statistics.
carrier_stat() { sipp_stat "$WORK/${1}_stat.csv" "$2"; }

# stop_carriers: stop the SIPp carriers (they run until stopped).
stop_carriers() { stop_uas; }

# stub_start MODE [LCRSTUB_ARGS...]: the routing API stub (lcrstub.py) on
# STUB_PORT (picked on the first call, kept on restarts), answering the
# route carrier-a -> gateway group carrier-a unless told otherwise.
stub_start() {
	local mode=$1 i
	shift
	[ -n "${STUB_PORT:-}" ] || pick 1 STUB_PORT
	"$PYTHON" "$CHAOS/lcrstub.py" --listen "127.0.0.1:$STUB_PORT" --route "${STUB_ROUTE:-carrier-a:carrier-a}" \
		--mode "$mode" "$@" >>"$WORK/stub.log" 2>&1 &
	STUB_PID=$!
	for ((i = 0; i < 50; i++)); do
		curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$STUB_PORT/_stats" 2>/dev/null && return 0
		kill -0 "$STUB_PID" 2>/dev/null || fail "lcrstub.py exited: $(tail -3 "$WORK/stub.log")"
		sleep 0.1
	done
	fail "lcrstub.py does not answer on $STUB_PORT"
}

# stub_mode MODE: switch the running stub to MODE.
stub_mode() {
	curl -fsS -o /dev/null --max-time 2 -d "$1" "http://127.0.0.1:$STUB_PORT/_mode" || fail "cannot set the stub's mode"
}

# stub_stop: stop the stub; its port refuses connections until stub_start.
stub_stop() {
	stop "$STUB_PID" 5
	STUB_PID=
}

# redis_start: a redis-server on REDIS_PORT (picked on the first call,
# kept on restarts), no persistence, waiting until it answers PING.
redis_start() {
	local i
	[ -n "${REDIS_PORT:-}" ] || pick 1 REDIS_PORT
	"$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$WORK" --logfile "$WORK/redis.log" >/dev/null 2>&1 &
	REDIS_PID=$!
	for ((i = 0; i < 50; i++)); do
		[ "$(redis_cli PING 2>/dev/null)" = PONG ] && return 0
		kill -0 "$REDIS_PID" 2>/dev/null || fail "redis-server exited: $(tail -3 "$WORK/redis.log")"
		sleep 0.1
	done
	fail "redis-server does not answer on $REDIS_PORT"
}

# redis_cli ARGS...: one command to the campaign's Redis.
redis_cli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# redis_stop SIGNAL: end redis-server with SIGNAL (TERM: it shuts down;
# KILL: it dies) and wait for it.
redis_stop() {
	kill "-$1" "$REDIS_PID" 2>/dev/null || true
	wait "$REDIS_PID" 2>/dev/null || true
	REDIS_PID=
}

# panics: the Go panics and fatal errors in sipedge's output and log.
panics() {
	cat "$WORK/sipedge.out" "$WORK/sipedge.log" 2>/dev/null |
		grep -cE '^panic: |^fatal error: |^goroutine [0-9]+ \[running\]:|level=ERROR.*panic' || true
}

# bad_cdr_lines: CDR lines that are not a whole JSON object (a torn write).
bad_cdr_lines() {
	[ -s "$WORK/cdr.jsonl" ] || { echo 0; return 0; }
	"$PYTHON" -c '
import json, sys
bad = 0
for line in open(sys.argv[1], "rb"):
    try:
        if not isinstance(json.loads(line), dict):
            bad += 1
    except ValueError:
        bad += 1
print(bad)' "$WORK/cdr.jsonl"
}

# cdrs [REGEX...]: the CDR lines matching every extended REGEX (all by
# default; lib.sh's cdr_count).
cdrs() { cdr_count "${@:-.}"; }

# cdr_by FIELD VALUE [--after EPOCH] [--before EPOCH]: the CDRs whose FIELD
# is VALUE ("-" for absent or empty), of the calls whose INVITE came in the
# window (cdrcount.py).
cdr_by() {
	local field=$1 value=$2
	shift 2
	"$PYTHON" "$CHAOS/cdrcount.py" "$WORK/cdr.jsonl" "$field" "$@" | awk -v v="$value" '$1 == v { n = $2 } END { print n + 0 }'
}

# verdict: the common expectations (no panic, whole CDR lines, a clean
# stop on SIGTERM unless CHECK_STOP=0), then the fault's RESULT line:
# "RESULT OFFERED ANSWERED FAILED CDRS PANICS PASS|FAIL [reasons]", and
# a NOTE line per note. Exits 0 (the fault ran; run.sh judges the row).
verdict() {
	local p c torn
	p=$(panics)
	c=$(cdrs)
	torn=$(bad_cdr_lines)
	[ "$p" = 0 ] || bad "$p panic lines in sipedge's output"
	[ "$torn" = 0 ] || bad "$torn CDR lines are not whole JSON objects"
	if [ "$CHECK_STOP" = 1 ]; then
		[ "$SIPEDGE_RC" = 0 ] || bad "sipedge's exit on SIGTERM: $SIPEDGE_RC"
	fi
	local n
	for n in "${NOTES[@]}"; do echo "NOTE $n"; done
	if [ ${#REASONS[@]} -eq 0 ]; then
		echo "RESULT $OFFERED $ANSWERED $FAILED $c $p PASS"
		OK=1
	else
		local why=${REASONS[0]} r
		for r in "${REASONS[@]:1}"; do why+="; $r"; done
		echo "RESULT $OFFERED $ANSWERED $FAILED $c $p FAIL $why"
		log "FAILED: $why"
	fi
	exit 0
}
