# sipedge. `make run` starts it on the embedded default; `make test` runs
# every test, installing what the tests need on a fresh Debian machine;
# `make test-short` runs the fast tier, the one to run while editing.

GO       ?= go
FUZZTIME ?= 30s
BENCH    ?= .
COUNT    ?= 5
PKGS     := ./...
# staticcheck, pinned; `go run` builds it (cached) without adding it to
# the product's go.mod.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
INTEROP_JOBS ?= 2

.PHONY: all build run test test-short test-short-nosockets test-unit test-race test-report test-wire bench capacity capacity-recheck report fuzz lint deps interop interop-deps chaos clean

all: build

build:
	$(GO) build $(PKGS)

# The embedded example config: SIP on 127.0.0.1:5060 (UDP and TCP), admin
# on 127.0.0.1:9090, calls from 127.0.0.1 routed to 127.0.0.1:5070.
run: build
	$(GO) run ./cmd/sipedge run

# Every test, in two rounds of jobs run at once, each job's output printed
# whole as it ends (-O). First lint and the report generator's tests, which
# compute, beside test-wire, which mostly waits on SIPp at a fixed call
# rate. Then the unit and the race tiers, TEST_JOBS at a time: most of each
# is cmd/sipedge/internal/server's end-to-end tests, which wait on SIPp,
# Redis and timers more than they compute, so that the two together keep 2
# cores about half busy. TEST_JOBS=1 runs them one after the other, for a
# machine too busy for the timing tests (the SIPp suites beside them too
# made some miss).
TEST_JOBS ?= 2
test: deps
	@$(MAKE) --no-print-directory -j3 -O lint test-report test-wire
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) -O test-unit test-race

# sipedge on the wire against real peers: the SIPp end to end, then the
# interop suite.
test-wire:
	@$(MAKE) --no-print-directory e2e && $(MAKE) --no-print-directory interop

# The longest package's tests first: go test runs packages in the order
# given, so they start as soon as they are built, the rest beside them.
FIRST = $(if $(filter ./...,$(PKGS)),./cmd/sipedge/internal/server/)

test-unit:
	$(GO) test -count=1 $(FIRST) $(PKGS)

# The fast tier (internal/testtier): no socket, no Redis or SIPp, no wait on
# the wall clock; under a minute on 2 cores. Run it while editing; run
# `make test` before committing.
test-short:
	$(GO) test -short -count=1 $(PKGS)

# Proves the fast tier opens no socket: each test binary under strace.
test-short-nosockets:
	GO=$(GO) bash internal/testtier/nosockets.sh $(PKGS)

# Allocation tests are excluded under -race (the race runtime allocates),
# and the server's SIPp load tests skip, saying so (loadTest: the race
# detector slows sipedge below the rates they hold it to).
test-race:
	$(GO) test -race -count=1 $(FIRST) $(PKGS)

# SIPp end to end on loopback (bench/sipp/run.sh): sipedge between a SIPp
# UAC and UAS; fails on any failed call or a missing CDR.
.PHONY: e2e
e2e:
	bash bench/sipp/run.sh 200 10 udp
	bash bench/sipp/run.sh 100 5 tcp
	bash bench/sipp/failover.sh 50 10
	bash bench/sipp/auth.sh 20 10

# The interop suite (bench/interop/README.md): sipedge between SIPp,
# Kamailio and baresip on loopback, each flow checked from what every side
# saw; fails on a flow that breaks, or on one of the known failures
# (bench/interop/known_failures) that starts to pass. INTEROP_JOBS flows at
# a time (2: about 80 s on 2 cores; 1: about 140 s).
interop: deps interop-deps
	bash bench/interop/run.sh -j $(INTEROP_JOBS)

# The fault campaign (bench/chaos/run.sh, bench/chaos/README.md): sipedge
# under routing API, Redis, carrier, drain and hostile-input faults with
# SIPp, redis-server and Python 3, a table of calls, CDRs and panics per
# fault; minutes long, so not part of make test. CHAOS="NAME ..." runs
# some of the faults (bench/chaos/run.sh -l lists them).
CHAOS ?=
chaos: deps
	bash bench/chaos/run.sh $(CHAOS)

# Every benchmark, medians of COUNT runs, into bench/results/benchmarks.txt
# and bench/REPORT.md (bench/report, its own module, so that gonum/plot
# never becomes a dependency of sipedge); it takes about ten minutes.
# First the parser and the sipgo baseline measured in the same run (the
# baseline lives in its own module, bench/sipgo, so that sipgo never
# becomes a dependency of sipedge); they alternate, one run each at a time,
# so that a machine that speeds up or slows down during the run moves both,
# and the speed-up is printed. Then every other package's benchmarks (a
# package under bench/ included), the call flows on one core (-cpu 1), the
# wire benchmarks (any Benchmark*Wire* in bench/, 4,000 calls a run: in
# the default second a paced run is 1,000 calls, and read 98 us a call
# where runs of 4,000 to 10,000 read 67 to 74) and the heap per call
# (one run each, it takes tens of seconds).
# The load average is recorded before and after.
RESULTS    := bench/results
BENCH_OUT  := /tmp/sipedge-bench
BENCH_PKGS  = $$(grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u | grep -v -e '^\./parser$$' -e '^\./bench$$' -e '^\./bench/sipgo$$' -e '^\./bench/report')

# A failing benchmark fails the target, not hidden by tee.
bench: SHELL := /bin/bash
bench: .SHELLFLAGS := -o pipefail -c
bench: deps
	$(GO) test -c -o $(BENCH_OUT)-parser.test ./parser/
	cd bench/sipgo && $(GO) test -c -o $(BENCH_OUT)-sipgo.test .
	rm -f $(BENCH_OUT).txt $(BENCH_OUT)-sipgo.txt $(BENCH_OUT)-rest.txt
	{ echo "nproc: $$(nproc)"; echo "go: $$($(GO) env GOVERSION)"; echo "loadavg: $$(cat /proc/loadavg)"; } >$(BENCH_OUT)-meta.txt
	for i in $$(seq $(COUNT)); do \
		(cd parser && $(BENCH_OUT)-parser.test -test.run '^$$' -test.bench '$(BENCH)' -test.benchmem) | tee -a $(BENCH_OUT).txt; \
		(cd bench/sipgo && $(BENCH_OUT)-sipgo.test -test.run '^$$' -test.bench . -test.benchmem) | tee -a $(BENCH_OUT)-sipgo.txt; \
	done
	$(GO) run ./bench/cmd/ratio $(BENCH_OUT).txt $(BENCH_OUT)-sipgo.txt
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) $(BENCH_PKGS) | tee $(BENCH_OUT)-rest.txt
	$(GO) test -run '^$$' -bench '^Benchmark(CallFlow|CallFlowFailover)$$' -benchmem -count $(COUNT) -cpu 1 ./bench/ | tee -a $(BENCH_OUT)-rest.txt
	$(GO) test -run '^$$' -bench 'Wire' -benchtime 4000x -benchmem -count $(COUNT) ./bench/ | tee -a $(BENCH_OUT)-rest.txt
	$(GO) test -run '^$$' -bench '^BenchmarkConcurrentCalls$$' -benchtime 1x -count $(COUNT) ./bench/ | tee -a $(BENCH_OUT)-rest.txt
	echo "loadavg: $$(cat /proc/loadavg)" >>$(BENCH_OUT)-rest.txt
	mkdir -p $(RESULTS)
	cat $(BENCH_OUT)-meta.txt $(BENCH_OUT).txt $(BENCH_OUT)-sipgo.txt $(BENCH_OUT)-rest.txt >$(RESULTS)/benchmarks.txt
	$(MAKE) report

# The SIPp capacity ramp through sipedge and Kamailio (bench/sipp/capacity.sh;
# STEPS, STEP_SECS, ROUNDS, SERIES in the environment or on the command line)
# into bench/results/capacity.csv, then bench/REPORT.md with its table and
# plots. About ten minutes a round at the default steps; not part of make test.
capacity: deps
	nice bash bench/sipp/capacity.sh $(RESULTS)/capacity.csv
	$(MAKE) report

# The compared rates alone (1,000 and 2,500 calls/s over UDP, both servers),
# two rounds, into bench/results/capacity-recheck.csv: the comparison
# measured again, in a quieter window than the whole ramp found.
capacity-recheck: deps
	STEPS="1000 2500" ROUNDS=2 SERIES="sipedge/plain/udp kamailio/plain/udp sipedge/failover/udp kamailio/failover/udp" \
		nice bash bench/sipp/capacity.sh $(RESULTS)/capacity-recheck.csv
	$(MAKE) report

# bench/REPORT.md from the results at hand (any may be missing).
report:
	cd bench/report && $(GO) run . -bench ../results/benchmarks.txt -capacity ../results/capacity.csv \
		-recheck ../results/capacity-recheck.csv -out ../REPORT.md

# The report generator's own tests (its own module).
test-report:
	cd bench/report && $(GO) vet ./... && $(GO) test -count=1 ./...

# Every fuzz target, in every package that has one, for FUZZTIME each.
fuzz:
	@for d in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for t in $$($(GO) test -list '^Fuzz' $$d/ | grep '^Fuzz'); do \
			echo "fuzz $$t ($$d) for $(FUZZTIME)"; \
			GO=$(GO) bash fuzz/run.sh "$$t" $(FUZZTIME) $$d/ || exit 1; \
		done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

# Tools the tests run against: a real redis-server and SIPp, curl for the
# SIPp scripts' admin API reads and ss (iproute2) for their port checks.
deps:
	@if ! command -v redis-server >/dev/null || ! command -v sipp >/dev/null || ! command -v curl >/dev/null || ! command -v ss >/dev/null; then \
		echo "installing redis-server, sip-tester, curl and iproute2"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server sip-tester curl iproute2 >/dev/null; \
	fi

# What the interop suite runs besides SIPp: Kamailio and a headless baresip.
interop-deps:
	@if ! command -v kamailio >/dev/null || ! command -v baresip >/dev/null; then \
		echo "installing kamailio and baresip-core"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kamailio baresip-core >/dev/null; \
	fi

clean:
	$(GO) clean -testcache
