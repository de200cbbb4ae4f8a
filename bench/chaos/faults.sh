# The campaign's faults: FAULTS lists them, in the order run.sh runs them,
# as "name|family|what it does and what is expected"; each has a function
# fault_NAME (dashes as underscores) in faults/FAMILY.sh, which sets the
# fault up, injects it, checks what every side saw (expect) and ends with
# sipedge stopped; fault.sh then prints its row (verdict). The durations
# and rates are variables, named in each family's file and in README.md.

FAULTS=(
	"api-down-fallback|api|routing API stops answering (connection refused) for a while, fallback group set: every call answered, none waits past the API timeout, the API routes again once back"
	"api-hang-fallback|api|routing API accepts and never answers for a while, fallback group set: same expectations"
	"api-slow-fallback|api|routing API answers slowly (within its timeout) for a while, fallback group set: every call routed by the API, none by the fallback"
	"api-garbage-fallback|api|routing API answers garbage (not JSON, wrong types, 2 MiB, 500, 302) for a while, fallback group set: as api-down-fallback"
	"api-down|api|routing API down from the start, no fallback: every call refused 503 at once, each with a CDR"
	"api-hang|api|routing API hangs from the start, no fallback: every call refused 503 within the API timeout, each with a CDR"
	"api-garbage|api|routing API answers garbage from the start, no fallback: as api-down"
	"redis-stop|redis|Redis (CPS limiter and LCR cache) shut down during load, then started again: every call answered without waiting on Redis, the loss and the return visible in the gauges"
	"redis-kill|redis|Redis killed (SIGKILL) during load, then started again: as redis-stop"
	"redis-freeze|redis|Redis frozen (SIGSTOP) during load, then thawed: as redis-stop"
	"carrier-blackhole|carrier|the first carrier swallows every INVITE for a few seconds: every call answered by failover, the carrier taken out within 2 s and back after"
	"carrier-late|carrier|the first carrier answers only after sipedge's CANCEL (ring timeout): every call answered by the next carrier, every late 200 ACKed and BYEd"
	"carrier-lost-invites|carrier|a carrier loses a burst of 20 INVITEs and 6 more among 20,000 at 1,000 calls/s: it stays up (no call refused without a dial), only calls it did not answer fail"
	"drain-timeout|drain|SIGTERM under load: later calls refused, calls up at the drain timeout get a BYE on both legs and a CDR, sipedge exits"
	"drain-bye-lost|drain|as drain-timeout, the carrier losing the first BYE of every call: every carrier leg gets its BYE retransmitted and answers it before sipedge exits"
	"drain-bye-auth|drain|as drain-timeout, the carrier challenging every BYE (Digest 401) 700 ms after it: every challenge answered before sipedge exits"
	"drain-sigterm-twice|drain|SIGTERM under load, another a second later: sipedge stops at once, not at the drain timeout"
	"hostile-fuzz|hostile|20,000 mutated messages (fuzz corpora, RFC 4475) over UDP and TCP beside live calls: no panic, every live call answered"
	"hostile-slowloris|hostile|480 TCP connections dribbling an INVITE a byte a second beside live TCP calls: each closed at the message timeout, excess refused, every live call answered"
	"hostile-flood|hostile|20,000 OPTIONS/s from an unknown source beside live calls: the source banned, every live call answered"
)

for f in "$(dirname "${BASH_SOURCE[0]}")"/faults/*.sh; do
	. "$f"
done
