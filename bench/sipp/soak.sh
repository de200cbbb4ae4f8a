#!/usr/bin/env bash
# SIPp soak of sipedge on loopback: leaks and stalls after sustained load.
#
#   bench/sipp/soak.sh RATE SECONDS [udp|tcp|failover|auth]
#
# Not part of make test or make e2e (a run lasts SECONDS plus about two
# minutes). Starts sipedge on free 127.0.0.1 ports, then a warm-up: WARMUP
# (default 35) seconds of calls at RATE/s, long enough for the transaction
# tables to reach their steady size (Timer J/L/M/D: 32 s at the default
# T1), after which it waits until sipedge is idle (no live call, no
# transaction) and for a garbage collection, and reads /metrics (the "warm"
# figures). Then the soak: SECONDS seconds at RATE/s, /metrics right
# after the load ("load"), and again once idle and after a collection
# ("idle"). A collection is waited for by reading /metrics until
# go_gc_duration_seconds_count moves (each read allocates; the runtime
# forces one every 2 minutes anyway). Scenarios: udp and tcp as run.sh
# (UAC -> sipedge -> one SIPp UAS, -sn uas); failover as failover.sh
# (carrier-a, a pinned next_hop, answers 503; carrier-b answers); auth as
# auth.sh (the carrier challenges INVITE and BYE with Digest 401s,
# bench/sipp/uas_auth.xml). failover and auth run over UDP.
#
# Prints, for warm, load and idle: live calls, transactions, stored
# transaction bytes, timers, goroutines, heap in use and RSS; SIPp's calls,
# failures and retransmissions; sipedge's CPU per call (as run.sh); CDRs.
# Exit status is non-zero unless: every SIPp call of both runs succeeded;
# sipedge becomes idle within IDLE_SECS (default 45) seconds after each
# run: sipedge_calls_active and sipedge_transactions_active 0 on every
# shard; idle goroutines at most 5 above warm; idle heap in use at most 20%
# plus 2 MiB above warm, plus 125% of the growth of sipedge_txn_stored_bytes
# (the buffers the transaction tables keep for reuse: a slot keeps the
# largest buffers it ever held, up to 4 KiB, so they grow while the live
# transactions stay level, as slots take turns holding each kind of
# transaction); those buffers at most 4 KiB (plus 256 KiB) for each
# transaction at the peak of the soak (dialog/txn's maxKeptSlotBytes;
# with SIPp's messages, 0.7 to 1.3 KiB were seen after 2-3 minutes); no
# transaction refused by the memory budget, no CDR dropped; no WARN or
# ERROR line in sipedge's log; one CDR per call, each with final_code 200
# (auth: and sipedge_carrier_auth_challenges_total{result="answered"}
# twice the calls); and REST_SECS (default 60) after the soak's last call,
# /metrics read once more ("rest"): memory comes back, the heap in use
# within 20 MiB of sipedge's at its start and its RSS within twice the
# start's (the transaction tables give their idle buffers back and sipedge
# returns the memory to the OS: dialog/txn/trim.go, the server's memory
# release).
# SIPp itself needs the CPU: on a busy machine its UAS stalls, drops
# datagrams and aborts calls (uas_auth.xml on an ACK it missed), and
# sipedge's passive health then marks the carrier down; see the SIPp error
# logs before suspecting sipedge.
# Temporary files live in one mktemp directory (metrics_warm.txt,
# metrics_load.txt, metrics_idle.txt, samples.txt among them): kept (and
# its path printed) on failure, removed on success unless KEEP=1. The
# shared machinery is in lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# usage: print the usage line and exit 2.
usage() {
	echo "usage: $0 RATE SECONDS [udp|tcp|failover|auth]" >&2
	exit 2
}

[ $# -ge 2 ] && [ $# -le 3 ] || usage
RATE=$1
DURATION=$2
MODE=${3:-udp}
WARMUP=${WARMUP:-35}
IDLE_SECS=${IDLE_SECS:-45}
REST_SECS=${REST_SECS:-60}
[[ $RATE =~ ^[1-9][0-9]*$ && $DURATION =~ ^[1-9][0-9]*$ && $WARMUP =~ ^[1-9][0-9]*$ ]] || usage
case $MODE in
udp | failover | auth) TRANSPORT=udp SIPP_T=u1 ;;
tcp) TRANSPORT=tcp SIPP_T=t1 ;;
*) usage ;;
esac
LIMIT=$((RATE * 4 > 200 ? RATE * 4 : 200)) # simultaneous calls cap for the UAC
SIPP_LOGS="warm_uac uac uas uas_a"

# cpu_ticks PID: utime+stime, as in run.sh.
cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	awk '{print $12 + $13}' <<<"$s"
}

# scrape FILE: sipedge's /metrics into WORK/FILE.
scrape() {
	curl -fsS --max-time 5 -o "$WORK/$1" "http://127.0.0.1:$ADMIN_PORT/metrics" || fail "cannot read /metrics"
}

# metric FILE NAME [LABEL_REGEX]: NAME summed over its label sets (those
# matching LABEL_REGEX) in WORK/FILE, or "?" if absent.
metric() {
	awk -v name="$2" -v re="${3:-}" '
		($1 == name || index($1, name "{") == 1) && $1 ~ re { n += $NF; seen = 1 }
		END { if (seen) printf "%.0f\n", n; else print "?" }
	' "$WORK/$1" 2>/dev/null || echo "?"
}

# wait_idle FILE: wait up to IDLE_SECS for no live call or transaction,
# then for a garbage collection; leaves the last /metrics in WORK/FILE and
# sets IDLE_AFTER (seconds waited, or "never").
wait_idle() {
	local t0 i gc
	t0=$SECONDS
	IDLE_AFTER=never
	while ((SECONDS - t0 <= IDLE_SECS)); do
		scrape "$1"
		if [ "$(metric "$1" sipedge_calls_active)" = 0 ] && [ "$(metric "$1" sipedge_transactions_active)" = 0 ]; then
			IDLE_AFTER="after $((SECONDS - t0))s"
			break
		fi
		sleep 1
	done
	gc=$(metric "$1" go_gc_duration_seconds_count)
	for ((i = 0; i < 20000 && SECONDS - t0 < IDLE_SECS + 150; i++)); do
		scrape "$1"
		[ "$(metric "$1" go_gc_duration_seconds_count)" = "$gc" ] || return 0
	done
	log "no garbage collection seen"
}

# sampler: every 10 s during the soak, a line of figures from /metrics in
# WORK/samples.txt (run in the background; ends when sipedge does).
sampler() {
	local t0=$SECONDS f=metrics_sample.txt
	echo "secs calls transactions stored_bytes heap_inuse heap_objects goroutines rss" >"$WORK/samples.txt"
	while curl -fsS --max-time 5 -o "$WORK/$f" "http://127.0.0.1:$ADMIN_PORT/metrics" 2>/dev/null; do
		echo "$((SECONDS - t0)) $(metric $f sipedge_calls_active) $(metric $f sipedge_transactions_active)" \
			"$(metric $f sipedge_txn_stored_bytes) $(metric $f go_memstats_heap_inuse_bytes)" \
			"$(metric $f go_memstats_heap_objects) $(metric $f go_goroutines) $(metric $f process_resident_memory_bytes)" \
			>>"$WORK/samples.txt"
		sleep 10
	done
}

# uac PREFIX CALLS: run the UAC (lib.sh's run_uac) for CALLS calls at RATE/s
# and keep its files as WORK/PREFIX_*; sets ATTEMPTED, SUCCEEDED, FAILED, RETRANS.
uac() {
	local f
	CALLS=$2
	UAC_TIMEOUT=$((CALLS / RATE + 30))
	log "SIPp UAC ($1): $CALLS calls at $RATE/s ($MODE, limit $LIMIT simultaneous)"
	run_uac
	[ "$UAC_RC" -eq 0 ] || log "SIPp UAC ($1) exit status $UAC_RC"
	for f in stat.csv out screen.log errors.log; do
		[ ! -e "$WORK/uac_$f" ] || [ "$1" = uac ] || mv "$WORK/uac_$f" "$WORK/$1_$f"
	done
	ATTEMPTED=$(sipp_stat "$WORK/$1_stat.csv" 'TotalCallCreated')
	SUCCEEDED=$(sipp_stat "$WORK/$1_stat.csv" 'SuccessfulCall(C)')
	FAILED=$(sipp_stat "$WORK/$1_stat.csv" 'FailedCall(C)')
	RETRANS=$(sipp_stat "$WORK/$1_stat.csv" 'Retransmissions(C)')
}

# dump_errors: on failure, show the SIPp error traces and non-200 CDRs (called by finish).
dump_errors() { dump_sipp_errors; }

setup_work sipedge-sipp-soak
pick 1 SIP_PORT ADMIN_PORT UAS_PORT UAS_A_PORT UAC_PORT WARM_PORT UAS_CP UAS_A_CP UAC_CP WARM_CP
pick 4 UAS_MP UAS_A_MP UAC_MP WARM_MP
build_sipedge
GW_URI="sip:127.0.0.1:$UAS_PORT"
[ "$TRANSPORT" = tcp ] && GW_URI+=";transport=tcp"
AUTH=
[ "$MODE" = auth ] && AUTH="auth: { username: acct-42, password: s3cret }"
ROUTE_A=
[ "$MODE" = failover ] && ROUTE_A="- { carrier_id: carrier-a, next_hop: \"sip:127.0.0.1:$UAS_A_PORT\", rate: 0.004, timeout_secs: 5 }"
write_config <<EOF
gateway:
  groups:
    - name: carrier-b
      transport: $TRANSPORT
      $AUTH
      destinations:
        - { uri: "$GW_URI", address: "127.0.0.1:$UAS_PORT" }
lcr:
  static_routes:
    - prefix: ""
      routes:
        $ROUTE_A
        - { carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005 }
EOF
start_sipedge
case $MODE in
failover)
	start_uas uas_a "$UAS_A_PORT" "$UAS_A_CP" "$UAS_A_MP" -sf "$HERE/uas_503.xml"
	start_uas uas "$UAS_PORT" "$UAS_CP" "$UAS_MP" -sn uas
	;;
auth) start_uas uas "$UAS_PORT" "$UAS_CP" "$UAS_MP" -sf "$HERE/uas_auth.xml" ;;
*) start_uas uas "$UAS_PORT" "$UAS_CP" "$UAS_MP" -sn uas ;;
esac
scrape metrics_start.txt

# --- warm-up, then the soak --------------------------------------------------
MAIN_PORT=$UAC_PORT MAIN_CP=$UAC_CP MAIN_MP=$UAC_MP
UAC_PORT=$WARM_PORT UAC_CP=$WARM_CP UAC_MP=$WARM_MP
uac warm_uac $((RATE * WARMUP))
WARM_CALLS=$CALLS W_ATT=$ATTEMPTED W_OK=$SUCCEEDED W_FAIL=$FAILED W_RTX=$RETRANS W_RC=$UAC_RC
wait_idle metrics_warm.txt
WARM_IDLE=$IDLE_AFTER

UAC_PORT=$MAIN_PORT UAC_CP=$MAIN_CP UAC_MP=$MAIN_MP
CLK_TCK=$(getconf CLK_TCK)
CPU0=$(cpu_ticks "$SIPEDGE_PID") || fail "cannot read /proc/$SIPEDGE_PID/stat"
sampler &
SAMPLER_PID=$!
uac uac $((RATE * DURATION))
kill "$SAMPLER_PID" 2>/dev/null || true
wait "$SAMPLER_PID" 2>/dev/null || true
CPU1=$(cpu_ticks "$SIPEDGE_PID") || fail "sipedge died during the run: $(tail -5 "$WORK/sipedge.out" "$WORK/sipedge.log" 2>/dev/null)"
scrape metrics_load.txt
LOAD_END=$SECONDS
stop_uas
wait_idle metrics_idle.txt
MAIN_IDLE=$IDLE_AFTER
while ((SECONDS - LOAD_END < REST_SECS)); do sleep 1; done
scrape metrics_rest.txt
LOG_BAD=$(grep -cE 'level=(WARN|ERROR)' "$WORK/sipedge.log" 2>/dev/null || true)
stop_sipedge # flushes the CDRs
LOG_BAD_STOP=$(grep -cE 'level=(WARN|ERROR)' "$WORK/sipedge.log" 2>/dev/null || true)

# --- report ------------------------------------------------------------------
TOTAL=$((WARM_CALLS + CALLS))
CDRS=$(cdr_count .)
CDR200=$(cdr_count '"final_code":200[,}]')
CPU_TICKS=$((CPU1 - CPU0))
US_PER_CALL=$(awk -v t="$CPU_TICKS" -v hz="$CLK_TCK" -v n="$CALLS" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')
ANSWERED=$(metric metrics_idle.txt sipedge_carrier_auth_challenges_total 'result="answered"')

# row NAME [LABEL_REGEX]: NAME in the start, warm, load, idle and rest metrics.
row() {
	local f out=
	for f in start warm load idle rest; do out+=$(printf ' %14s' "$(metric "metrics_$f.txt" "$@")"); done
	printf '  %-36s%s\n' "$1" "$out"
}

cat <<EOF
sipedge SIPp soak: $MODE, $RATE calls/s, warm-up ${WARMUP}s ($WARM_CALLS calls) then ${DURATION}s ($CALLS calls)
  warm-up UAC:        $W_ATT attempted, $W_OK succeeded, $W_FAIL failed, $W_RTX retransmissions (exit $W_RC); idle $WARM_IDLE
  soak UAC:           $ATTEMPTED attempted, $SUCCEEDED succeeded, $FAILED failed, $RETRANS retransmissions in ${ELAPSED}s (exit $UAC_RC); idle $MAIN_IDLE
  sipedge CPU:        $US_PER_CALL us/call ($CPU_TICKS ticks at $CLK_TCK Hz over the soak)
  CDR lines:          $CDRS ($CDR200 with final_code 200) for $TOTAL calls
  WARN/ERROR lines:   $LOG_BAD before stopping sipedge, $LOG_BAD_STOP after
EOF
[ "$MODE" != auth ] || echo "  auth answered:      $ANSWERED challenges for $TOTAL calls"
printf '  %-36s%15s%15s%15s%15s%15s\n' metric start warm load idle "rest ${REST_SECS}s"
for m in sipedge_calls_active sipedge_transactions_active sipedge_txn_stored_bytes sipedge_txn_inuse_bytes \
	sipedge_txn_pooled_bytes sipedge_memory_releases_total sipedge_shard_timers \
	sipedge_tcp_connections go_goroutines go_memstats_heap_inuse_bytes go_memstats_heap_objects \
	process_resident_memory_bytes sipedge_sip_retransmissions_total sipedge_sip_retransmissions_absorbed_total \
	sipedge_txn_budget_refused_total sipedge_cdr_dropped_total sipedge_transport_send_errors_total; do
	row "$m"
done
echo "  every 10 s of the soak:"
awk '{ printf "   "; for (i = 1; i <= NF; i++) printf " %13s", $i; print "" }' "$WORK/samples.txt"

# --- verdict -----------------------------------------------------------------
bad=0
for v in W_ATT W_OK W_FAIL ATTEMPTED SUCCEEDED FAILED; do
	num "${!v}" || { log "FAIL: cannot read SIPp statistics ($v=${!v})"; bad=1; }
done
if [ "$bad" = 0 ]; then
	[ "$W_ATT" -eq "$WARM_CALLS" ] && [ "$W_OK" -eq "$WARM_CALLS" ] && [ "$W_FAIL" -eq 0 ] ||
		{ log "FAIL: warm-up: $W_OK of $WARM_CALLS calls succeeded ($W_ATT attempted, $W_FAIL failed)"; bad=1; }
	all_calls_ok || bad=1
fi
[ "$W_RC" -eq 0 ] || { log "FAIL: warm-up SIPp UAC exit status $W_RC"; bad=1; }
[ "$WARM_IDLE" != never ] || { log "FAIL: sipedge not idle ${IDLE_SECS}s after the warm-up"; bad=1; }
[ "$MAIN_IDLE" != never ] || { log "FAIL: sipedge not idle ${IDLE_SECS}s after the soak"; bad=1; }
G_WARM=$(metric metrics_warm.txt go_goroutines)
G_IDLE=$(metric metrics_idle.txt go_goroutines)
H_WARM=$(metric metrics_warm.txt go_memstats_heap_inuse_bytes)
H_IDLE=$(metric metrics_idle.txt go_memstats_heap_inuse_bytes)
S_WARM=$(metric metrics_warm.txt sipedge_txn_stored_bytes)
S_IDLE=$(metric metrics_idle.txt sipedge_txn_stored_bytes)
if num "$G_WARM" && num "$G_IDLE" && num "$H_WARM" && num "$H_IDLE" && num "$S_WARM" && num "$S_IDLE"; then
	[ "$G_IDLE" -le $((G_WARM + 5)) ] || { log "FAIL: $G_IDLE goroutines when idle, $G_WARM after the warm-up"; bad=1; }
	[ "$H_IDLE" -le $((H_WARM * 6 / 5 + (S_IDLE - S_WARM) * 5 / 4 + 2097152)) ] || {
		log "FAIL: heap in use $H_IDLE bytes when idle, $H_WARM after the warm-up (transaction tables: $S_IDLE, $S_WARM)"
		bad=1
	}
else
	log "FAIL: cannot read go_goroutines, go_memstats_heap_inuse_bytes or sipedge_txn_stored_bytes"
	bad=1
fi
PEAK=$(awk 'NR > 1 && $3 > p { p = $3 } END { print p + 0 }' "$WORK/samples.txt")
L_TXNS=$(metric metrics_load.txt sipedge_transactions_active)
num "$L_TXNS" && [ "$L_TXNS" -gt "$PEAK" ] && PEAK=$L_TXNS
if num "$S_IDLE"; then
	[ "$S_IDLE" -le $((PEAK * 4096 + 262144)) ] || {
		log "FAIL: transaction tables keep $S_IDLE bytes when idle, over 4 KiB for each of the $PEAK transactions at the peak"
		bad=1
	}
fi
H_START=$(metric metrics_start.txt go_memstats_heap_inuse_bytes)
H_REST=$(metric metrics_rest.txt go_memstats_heap_inuse_bytes)
R_START=$(metric metrics_start.txt process_resident_memory_bytes)
R_REST=$(metric metrics_rest.txt process_resident_memory_bytes)
if num "$H_START" && num "$H_REST" && num "$R_START" && num "$R_REST"; then
	[ "$H_REST" -le $((H_START + 20971520)) ] ||
		{ log "FAIL: heap in use $H_REST bytes ${REST_SECS}s after the soak, $H_START at the start: want within 20 MiB"; bad=1; }
	[ "$R_REST" -le $((2 * R_START)) ] ||
		{ log "FAIL: RSS $R_REST bytes ${REST_SECS}s after the soak, $R_START at the start: want within twice"; bad=1; }
else
	log "FAIL: cannot read go_memstats_heap_inuse_bytes or process_resident_memory_bytes at the start or at rest"
	bad=1
fi
for m in sipedge_txn_budget_refused_total sipedge_cdr_dropped_total; do
	[ "$(metric metrics_idle.txt $m)" = 0 ] || { log "FAIL: $m $(metric metrics_idle.txt $m)"; bad=1; }
done
[ "$LOG_BAD_STOP" -eq 0 ] || { log "FAIL: $LOG_BAD_STOP WARN/ERROR lines in sipedge's log"; bad=1; }
[ "$CDRS" -eq "$TOTAL" ] || { log "FAIL: $CDRS CDR lines for $TOTAL calls"; bad=1; }
[ "$CDR200" -eq "$TOTAL" ] || { log "FAIL: $CDR200 CDRs with final_code 200 for $TOTAL calls"; bad=1; }
[ "$MODE" != auth ] || [ "$ANSWERED" = $((2 * TOTAL)) ] ||
	{ log "FAIL: sipedge answered $ANSWERED challenges, want $((2 * TOTAL))"; bad=1; }
finish "$bad"
