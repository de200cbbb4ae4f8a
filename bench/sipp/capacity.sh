#!/usr/bin/env bash
# Capacity ramp: SIPp's call rate stepped up through sipedge and through
# Kamailio on this machine, with the server's CPU per call at each step.
#
#   bench/sipp/capacity.sh [OUT.csv]          (default bench/capacity.csv)
#
# Settings (environment):
#   STEPS      offered rates in calls/s    "250 500 1000 1500 2000 2500 3000"
#   STEP_SECS  seconds of calls per step   10
#   ROUNDS     times the whole ramp runs   1 (several short rounds beat one
#              long one on a shared machine; the report takes medians)
#   SERIES     what is ramped, SERVER/SCENARIO/TRANSPORT each:
#              "sipedge/plain/udp kamailio/plain/udp sipedge/failover/udp
#               kamailio/failover/udp sipedge/plain/tcp sipedge/failover/tcp"
#              (Kamailio over UDP only)
#   KAMAILIO_CHILDREN  Kamailio's UDP worker processes   the number of cores
#   SIPP_NICE  niceness added to every SIPp process      0
#   APPEND     1: add rounds to an existing OUT.csv (numbered on from its
#              last), so that rounds can be spread over time   0
#
# A series starts its server and carriers once and ramps through STEPS,
# each step a fresh SIPp UAC placing STEP_SECS x rate calls (at most rate x
# 4 at once), then stops them. Scenarios, the same SIPp scenarios for both
# servers (uac_routed.xml and uas_routed.xml: SIPp's built-in uac and uas
# with the dialog's route set, which a record-routing proxy needs):
#   plain     one carrier, carrier-b, answers (uas_routed.xml)
#   failover  carrier-a answers 503 (uas_503.xml), then carrier-b answers:
#             one failover per call, as failover.sh
# sipedge is configured as run.sh and failover.sh configure it, with
# carrier-b's passive health off: Kamailio's dispatcher marks no
# destination down either, and a SIPp carrier starved of CPU by the load
# is not a carrier fault. Kamailio is bench/kamailio/kamailio.cfg: a
# stateful proxy (tm, record_route) with dispatcher failover on 5xx and
# timeout, installed from Debian when missing, with sipedge's timeouts
# (5 s for carrier-a in failover, else Timer B and a 30 s ring bound).
#
# Per step, one CSV row: offered rate; calls attempted, answered and
# failed (SIPp UAC), the success ratio (answered / attempted: calls SIPp
# never finished count as not answered); retransmissions seen by SIPp, the
# UAC's and the carriers'; the server's CPU (utime+stime of the process
# and its children, Kamailio's workers, from /proc/PID/stat, sampled as
# the UAC starts and ends) per attempted call; the server's peak memory
# (the sum of Pss over its processes, sampled each second: Kamailio's
# shared memory counted once); the machine's busy share of all cores and
# the 1-minute load average at the step's start and end (other work on a
# shared machine shows there); and the run's KAMAILIO_CHILDREN and
# SIPP_NICE. Progress goes to stderr.
#
# The rows are measurements, not a verdict: the script fails only when a
# server or carrier dies or SIPp's statistics cannot be read. It is
# bounded: each step lasts at most STEP_SECS + 15 s (the UAC's global
# timeout; calls still open then count as not answered). go run ./bench/report
# turns the CSV into tables and plots (make capacity). Shared machinery
# (ports, SIPp, sipedge) is in lib.sh, Kamailio's in bench/kamailio/lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$HERE/../kamailio/lib.sh"

usage() {
	echo "usage: $0 [OUT.csv]" >&2
	exit 2
}

[ $# -le 1 ] || usage
OUT=${1:-$REPO/bench/capacity.csv}
STEPS=${STEPS:-250 500 1000 1500 2000 2500 3000}
STEP_SECS=${STEP_SECS:-10}
ROUNDS=${ROUNDS:-1}
SERIES=${SERIES:-sipedge/plain/udp kamailio/plain/udp sipedge/failover/udp kamailio/failover/udp sipedge/plain/tcp sipedge/failover/tcp}
KAMAILIO_CHILDREN=${KAMAILIO_CHILDREN:-$(nproc)}
SIPP_NICE=${SIPP_NICE:-0}
APPEND=${APPEND:-0}
for v in STEP_SECS ROUNDS KAMAILIO_CHILDREN; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$0: $v must be a positive integer" >&2; usage; }
done
[[ $SIPP_NICE =~ ^[0-9]+$ ]] || { echo "$0: SIPP_NICE must be 0 to 19" >&2; usage; }
for r in $STEPS; do [[ $r =~ ^[1-9][0-9]*$ ]] || { echo "$0: bad rate $r in STEPS" >&2; usage; }; done
for s in $SERIES; do
	case $s in
	sipedge/plain/udp | sipedge/plain/tcp | sipedge/failover/udp | sipedge/failover/tcp) ;;
	kamailio/plain/udp | kamailio/failover/udp) ;;
	*) echo "$0: bad series $s" >&2; usage ;;
	esac
done

# SIPp ends itself after 120 trips of its watchdog (a main loop late by
# 500 ms), which an overloaded step or a busy machine trips: the ramp is
# meant to overload, so the watchdog only counts.
SIPP_WATCHDOG=(-watchdog_minor_maxtriggers 1000000 -watchdog_major_maxtriggers 1000000)
UAC_ARGS=(-sf "$HERE/uac_routed.xml" "${SIPP_WATCHDOG[@]}")
[ "$SIPP_NICE" = 0 ] || SIPP_PREFIX=(nice -n "$SIPP_NICE")
SIPP_LOGS="uac uas_a uas_b"
CLK_TCK=$(getconf CLK_TCK)
SERVER_PID=
SAMPLER_PID=

# tree_pids PID: PID and its descendants (Kamailio's workers).
tree_pids() {
	local p
	echo "$1"
	for p in $(pgrep -P "$1" 2>/dev/null || true); do tree_pids "$p"; done
}

# tree_ticks PID: utime+stime of PID and its descendants, in clock ticks
# (fields 14 and 15 of /proc/PID/stat, counted after the comm field,
# which may hold spaces).
tree_ticks() {
	local p s n=0
	for p in $(tree_pids "$1"); do
		s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		s=${s##*) }
		n=$((n + $(awk '{print $12 + $13}' <<<"$s")))
	done
	echo "$n"
}

# tree_pss_kb PID: the sum of Pss (KiB) over PID and its descendants.
tree_pss_kb() {
	local p n=0 kb
	for p in $(tree_pids "$1"); do
		kb=$(awk '$1 == "Pss:" { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null) || continue
		n=$((n + ${kb:-0}))
	done
	echo "$n"
}

# sample_memory PID FILE: each second, the largest tree_pss_kb so far into
# FILE (run in the background, killed at the step's end).
sample_memory() {
	local peak=0 kb
	while kill -0 "$1" 2>/dev/null; do
		kb=$(tree_pss_kb "$1")
		[ "$kb" -le "$peak" ] || { peak=$kb; echo "$peak" >"$2"; }
		sleep 1
	done
}

# cpu_busy_total: busy and total jiffies of all cores, from /proc/stat.
cpu_busy_total() {
	awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat
}

loadavg() { cut -d' ' -f1 /proc/loadavg; }

# stat_or_zero FILE COLUMN: sipp_stat, 0 when the file has no row yet.
stat_or_zero() {
	local v
	v=$(sipp_stat "$1" "$2")
	num "$v" && echo "$v" || echo 0
}

# carriers_retrans: the carriers' retransmissions so far (cumulative).
carriers_retrans() {
	echo $(($(stat_or_zero "$WORK/uas_b_stat.csv" 'Retransmissions(C)') + $(stat_or_zero "$WORK/uas_a_stat.csv" 'Retransmissions(C)')))
}

# carrier NAME PORT CP MP SCENARIO_FILE: a SIPp carrier writing its statistics each second.
carrier() {
	start_uas "uas_$1" "$2" "$3" "$4" -sf "$5" "${SIPP_WATCHDOG[@]}" -trace_stat -stf "$WORK/uas_$1_stat.csv" -fd 1
}

# start_server SERVER SCENARIO: sipedge or Kamailio on fresh ports with the
# carriers of SCENARIO; sets SERVER_PID and SIP_PORT.
start_server() {
	local server=$1 scenario=$2 gw_b a_hop route_a=
	pick 1 SIP_PORT ADMIN_PORT UAS_A_PORT UAS_B_PORT UAS_A_CP UAS_B_CP
	pick 4 UAS_A_MP UAS_B_MP
	if [ "$server" = sipedge ]; then
		ln -s "$ROOT/sipedge" "$WORK/sipedge"
		gw_b="sip:127.0.0.1:$UAS_B_PORT"
		a_hop="sip:127.0.0.1:$UAS_A_PORT"
		if [ "$TRANSPORT" = tcp ]; then
			gw_b+=";transport=tcp"
			a_hop+=";transport=tcp"
		fi
		[ "$scenario" = failover ] &&
			route_a="- { carrier_id: carrier-a, next_hop: \"$a_hop\", rate: 0.004, timeout_secs: 5 }"
		write_config <<-EOF
			gateway:
			  groups:
			    - name: carrier-b
			      transport: $TRANSPORT
			      passive: { disabled: true }
			      destinations:
			        - { uri: "$gw_b", address: "127.0.0.1:$UAS_B_PORT" }
			lcr:
			  static_routes:
			    - prefix: ""
			      routes:
			        $route_a
			        - { carrier_id: carrier-b, gateway_group: carrier-b, rate: 0.005 }
		EOF
		start_sipedge
		SERVER_PID=$SIPEDGE_PID
	else
		if [ "$scenario" = failover ]; then
			write_kamailio_config "$SIP_PORT" "$KAMAILIO_CHILDREN" 5000 "127.0.0.1:$UAS_A_PORT" "127.0.0.1:$UAS_B_PORT"
		else
			write_kamailio_config "$SIP_PORT" "$KAMAILIO_CHILDREN" 0 "127.0.0.1:$UAS_B_PORT"
		fi
		start_kamailio
		SERVER_PID=$KAMAILIO_PID
	fi
	[ "$scenario" = failover ] && carrier a "$UAS_A_PORT" "$UAS_A_CP" "$UAS_A_MP" "$HERE/uas_503.xml"
	carrier b "$UAS_B_PORT" "$UAS_B_CP" "$UAS_B_MP" "$HERE/uas_routed.xml"
}

stop_server() {
	stop_uas
	stop_sipedge
	stop_kamailio
	SERVER_PID=
}

# alive WHAT: fail unless the server and every carrier still run.
alive() {
	local pid
	kill -0 "$SERVER_PID" 2>/dev/null || fail "$1: the server died: $(tail -5 "$WORK"/*.log 2>/dev/null)"
	for pid in $UAS_PIDS; do kill -0 "$pid" 2>/dev/null || fail "$1: a SIPp carrier died (see $WORK/uas_*)"; done
}

# step ROUND SERVER SCENARIO RATE: one step of the ramp; appends a CSV row.
step() {
	local round=$1 server=$2 scenario=$3 rate=$4 load0 load1 cpu0 cpu1 busy0 busy1 total0 total1 rtx0 rtx1 peak
	local uac_rtx ratio us cpu_s host
	CALLS=$((rate * STEP_SECS))
	RATE=$rate
	LIMIT=$((rate * 4 > 200 ? rate * 4 : 200))
	UAC_TIMEOUT=$((STEP_SECS + 15))
	pick 1 UAC_PORT UAC_CP
	pick 4 UAC_MP
	rm -f "$WORK"/uac_*
	load0=$(loadavg)
	rtx0=$(carriers_retrans)
	read -r busy0 total0 < <(cpu_busy_total)
	cpu0=$(tree_ticks "$SERVER_PID")
	echo 0 >"$WORK/peak_pss_kb"
	sample_memory "$SERVER_PID" "$WORK/peak_pss_kb" &
	SAMPLER_PID=$!
	run_uac
	cpu1=$(tree_ticks "$SERVER_PID")
	read -r busy1 total1 < <(cpu_busy_total)
	kill "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" 2>/dev/null || true
	SAMPLER_PID=
	alive "$rate calls/s"
	load1=$(loadavg)
	sleep 1.5 # the carriers write their statistics each second
	rtx1=$(carriers_retrans)
	read_uac_stats
	num "$ATTEMPTED" && num "$SUCCEEDED" && num "$FAILED" ||
		fail "cannot read the SIPp UAC's statistics at $rate calls/s: $(tail -3 "$WORK/uac.out")"
	uac_rtx=$(stat_or_zero "$WORK/uac_stat.csv" 'Retransmissions(C)')
	peak=$(cat "$WORK/peak_pss_kb")
	read -r ratio us cpu_s host < <(awk -v a="$ATTEMPTED" -v s="$SUCCEEDED" -v t=$((cpu1 - cpu0)) -v hz="$CLK_TCK" \
		-v b=$((busy1 - busy0)) -v T=$((total1 - total0)) 'BEGIN {
			printf "%.4f %.1f %.2f %.1f\n", a ? s / a : 0, a ? t * 1e6 / hz / a : 0, t / hz, T ? b * 100 / T : 0 }')
	echo "$round,$server,$scenario,$TRANSPORT,$rate,$STEP_SECS,$ATTEMPTED,$SUCCEEDED,$FAILED,$ratio,$uac_rtx,$((rtx1 - rtx0)),$cpu_s,$us,$((peak / 1024)),$host,$load0,$load1,$ELAPSED,$KAMAILIO_CHILDREN,$SIPP_NICE" >>"$OUT"
	log "round $round $server $scenario $TRANSPORT $rate/s: $SUCCEEDED/$ATTEMPTED answered ($ratio), $FAILED failed," \
		"retransmissions $uac_rtx+$((rtx1 - rtx0)), $us us/call, $((peak / 1024)) MB, host ${host}% busy, load $load0 -> $load1"
	sleep 2
}

# dump_errors: on failure, the SIPp error traces (called by finish).
dump_errors() { dump_sipp_errors; }

setup_work sipedge-capacity
ROOT=$WORK
trap 'kill "$SAMPLER_PID" 2>/dev/null || true; stop_kamailio; WORK=$ROOT; cleanup' EXIT
case " $SERIES " in *" kamailio/"*) need_kamailio ;; esac
build_sipedge
mkdir -p "$(dirname "$OUT")"
HEADER="round,server,scenario,transport,offered_cps,step_secs,attempted,answered,failed,success_ratio,uac_retransmissions,carrier_retransmissions,cpu_secs,cpu_us_per_call,peak_pss_mb,host_busy_pct,load_start,load_end,elapsed_secs,kamailio_children,sipp_nice"
FIRST=1
if [ "$APPEND" = 1 ] && [ -s "$OUT" ]; then
	[ "$(head -1 "$OUT")" = "$HEADER" ] || fail "$OUT has other columns; cannot append to it"
	FIRST=$(($(awk -F, 'NR > 1 && $1 > r { r = $1 } END { print r + 0 }' "$OUT") + 1))
else
	echo "$HEADER" >"$OUT"
fi
log "steps $STEPS calls/s, ${STEP_SECS}s each, $ROUNDS round(s); series: $SERIES; Kamailio children $KAMAILIO_CHILDREN; SIPp nice $SIPP_NICE; rows into $OUT"
for ((round = FIRST; round < FIRST + ROUNDS; round++)); do
	for s in $SERIES; do
		IFS=/ read -r server scenario TRANSPORT <<<"$s"
		SIPP_T=u1
		[ "$TRANSPORT" = tcp ] && SIPP_T=t1
		WORK=$ROOT/r$round-$server-$scenario-$TRANSPORT
		mkdir -p "$WORK"
		UAS_PIDS=
		start_server "$server" "$scenario"
		for rate in $STEPS; do step "$round" "$server" "$scenario" "$rate"; done
		stop_server
	done
done
WORK=$ROOT
log "done: rounds $FIRST to $((FIRST + ROUNDS - 1)), $(($(wc -l <"$OUT") - 1)) steps in $OUT"
OK=1
