# The Redis faults; sourced by faults.sh. One redis-server serves both of
# sipedge's Redis uses: the CPS limiter (ratelimit.redis; carrier-a has a
# cps limit far above the load, so every dial asks Redis and none waits)
# and the LCR decision cache (lcr.cache, local_ttl_secs 0 so that every
# call reads Redis; the stub's answers live 1 s there). A caller places
# REDIS_RATE calls/s for REDIS_SECS seconds; REDIS_FAULT_AT seconds in,
# Redis fails for REDIS_FAULT_SECS seconds: stopped (SIGTERM, then started
# again, empty), killed (SIGKILL, then started again) or frozen (SIGSTOP,
# then SIGCONT: its connections stay open and silent).
#
# Expected: every call answered, none waiting past REDIS_WAIT_MS for its
# first 180 (the Redis deadlines are 20 and 50 ms; the margin is the
# machine's), each with a CDR; during the fault both Redis gauges
# (sipedge_ratelimit_redis_up, sipedge_lcr_redis_up) read 0 and a warning
# is logged; after it, both read 1 again and CPS decisions go to Redis
# again.

REDIS_RATE=${REDIS_RATE:-50}
REDIS_SECS=${REDIS_SECS:-14}
REDIS_FAULT_AT=${REDIS_FAULT_AT:-3}
REDIS_FAULT_SECS=${REDIS_FAULT_SECS:-4}
REDIS_WAIT_MS=${REDIS_WAIT_MS:-1000}

# redis_fault HOW: the run, with Redis failing as HOW says (stop, kill, freeze).
redis_fault() {
	local how=$1 rl_calls_healed
	carrier a uas
	redis_start
	stub_start ok --ttl 1
	sipedge_config <<-EOF
		gateway:
		  groups:
		    - name: carrier-a
		      cps: { rate: 2000, burst: 100 }
		      destinations:
		        - { uri: "sip:127.0.0.1:$A_PORT", address: "127.0.0.1:$A_PORT" }
		lcr:
		  api_url: "http://127.0.0.1:$STUB_PORT/route"
		  timeout_ms: 500
		  cache: shared
		cache:
		  - { name: shared, url: "redis://127.0.0.1:$REDIS_PORT", local_ttl_secs: 0 }
		ratelimit:
		  redis: "redis://127.0.0.1:$REDIS_PORT"
	EOF
	sipedge_up
	caller_start caller uac_call.xml $((REDIS_RATE * REDIS_SECS)) "$REDIS_RATE"
	sleep "$REDIS_FAULT_AT"
	case $how in
	stop) redis_stop TERM ;;
	kill) redis_stop KILL ;;
	freeze) kill -STOP "$REDIS_PID" ;;
	esac
	sleep "$REDIS_FAULT_SECS"
	scrape metrics_fault.txt
	case $how in
	stop | kill) redis_start ;;
	freeze) kill -CONT "$REDIS_PID" ;;
	esac
	sleep 1
	scrape metrics_healed.txt
	caller_wait caller
	scrape metrics_end.txt
	sipedge_down

	local rl_down lcr_down rl_up lcr_up rl_before rl_after warns
	rl_down=$(metric metrics_fault.txt sipedge_ratelimit_redis_up)
	lcr_down=$(metric metrics_fault.txt sipedge_lcr_redis_up)
	rl_up=$(metric metrics_end.txt sipedge_ratelimit_redis_up)
	lcr_up=$(metric metrics_end.txt sipedge_lcr_redis_up)
	rl_before=$(metric metrics_healed.txt sipedge_ratelimit_redis_calls_total)
	rl_after=$(metric metrics_end.txt sipedge_ratelimit_redis_calls_total)
	warns=$(grep -ciE 'level=(WARN|ERROR).*redis' "$WORK/sipedge.log" || true)
	note "during the fault: ratelimit_redis_up $rl_down, lcr_redis_up $lcr_down; at the end: $rl_up, $lcr_up; CPS decisions sent to Redis after it came back: $((rl_after - rl_before)); $warns Redis warnings; longest wait $MAX_WAIT_MS ms"
	note "failure-mode decisions $(metric metrics_end.txt sipedge_ratelimit_failure_mode_total), LCR Redis errors $(metric metrics_end.txt sipedge_lcr_redis_errors_total)"
	expect "every call answered ($ANSWERED of $OFFERED)" '[ "$ANSWERED" = "$OFFERED" ]'
	expect "no call waited past $REDIS_WAIT_MS ms (longest $MAX_WAIT_MS ms)" '[ "$MAX_WAIT_MS" -le "$REDIS_WAIT_MS" ]'
	expect "every call has its CDR ($(cdrs) for $OFFERED)" '[ "$(cdrs)" = "$OFFERED" ]'
	expect "Redis down is visible: both Redis gauges 0 during the fault (ratelimit $rl_down, lcr $lcr_down) and a warning logged" \
		'[ "$rl_down" = 0 ] && [ "$lcr_down" = 0 ] && [ "$warns" -gt 0 ]'
	expect "Redis back is used again: both gauges 1 at the end (ratelimit $rl_up, lcr $lcr_up), CPS decisions sent to Redis" \
		'[ "$rl_up" = 1 ] && [ "$lcr_up" = 1 ] && [ "$rl_after" -gt "$rl_before" ]'
}

fault_redis_stop() { redis_fault stop; }
fault_redis_kill() { redis_fault kill; }
fault_redis_freeze() { redis_fault freeze; }
