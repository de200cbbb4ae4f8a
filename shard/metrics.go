package shard

import (
	"fmt"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/parser"
)

// parseErrorCodes are the codes the parser answers with; others count as "other".
var parseErrorCodes = [...]int{400, 413, 414, 416, 420, 505, 513}

// shardMetrics are one shard's counters, created once with the shard label
// baked in; the per-message path only increments.
type shardMetrics struct {
	requestsIn    [parser.NumMethods]*metrics.Counter // by parser.Method (MethodOther = extension)
	responsesIn   [7]*metrics.Counter                 // by status class 1-6
	requestsOut   [16]*metrics.Counter
	responsesOut  [7]*metrics.Counter
	parseErrors   [len(parseErrorCodes) + 1]*metrics.Counter
	droppedResp   *metrics.Counter
	oversize      *metrics.Counter
	handoffsOut   *metrics.Counter
	handoffsIn    *metrics.Counter
	handoffDrops  *metrics.Counter
	sendErrors    *metrics.Counter
	framingErrors *metrics.Counter
	tcpRejected   *metrics.Counter
	tcpTimeouts   *metrics.Counter
	tcpStalled    *metrics.Counter
	tcpConns      *metrics.Counter
	timers        *metrics.Gauge
	floodDropped  *metrics.Counter
	floodBans     *metrics.Counter
	// batchIntervals counts the intervals a busy loop slept before taking
	// its datagrams (poll.go).
	batchIntervals *metrics.Counter
}

func newShardMetrics(set *metrics.Set, shard int) shardMetrics {
	var m shardMetrics
	name := func(n, labels string) string {
		if labels != "" {
			labels = "," + labels
		}
		return fmt.Sprintf(`%s{shard="%d"%s}`, n, shard, labels)
	}
	for meth := parser.Method(0); int(meth) < len(m.requestsIn); meth++ {
		label := meth.String()
		if meth == parser.MethodOther {
			label = "other"
		}
		m.requestsIn[meth] = set.NewCounter(name("sipedge_sip_requests_in_total", `method="`+label+`"`))
		m.requestsOut[meth] = set.NewCounter(name("sipedge_sip_requests_out_total", `method="`+label+`"`))
	}
	for class := 1; class <= 6; class++ {
		m.responsesIn[class] = set.NewCounter(name("sipedge_sip_responses_in_total", fmt.Sprintf(`class="%dxx"`, class)))
		m.responsesOut[class] = set.NewCounter(name("sipedge_sip_responses_out_total", fmt.Sprintf(`class="%dxx"`, class)))
	}
	for i, code := range parseErrorCodes {
		m.parseErrors[i] = set.NewCounter(name("sipedge_sip_parse_errors_total", fmt.Sprintf(`code="%d"`, code)))
	}
	m.parseErrors[len(parseErrorCodes)] = set.NewCounter(name("sipedge_sip_parse_errors_total", `code="other"`))
	m.droppedResp = set.NewCounter(name("sipedge_sip_malformed_responses_dropped_total", ""))
	m.oversize = set.NewCounter(name("sipedge_sip_oversize_datagrams_dropped_total", ""))
	m.handoffsOut = set.NewCounter(name("sipedge_shard_handoffs_out_total", ""))
	m.handoffsIn = set.NewCounter(name("sipedge_shard_handoffs_in_total", ""))
	m.handoffDrops = set.NewCounter(name("sipedge_shard_handoff_queue_full_total", ""))
	m.sendErrors = set.NewCounter(name("sipedge_transport_send_errors_total", ""))
	m.framingErrors = set.NewCounter(name("sipedge_tcp_framing_errors_total", ""))
	m.tcpRejected = set.NewCounter(name("sipedge_tcp_connections_rejected_total", ""))
	m.tcpTimeouts = set.NewCounter(name("sipedge_tcp_timeouts_total", ""))
	m.tcpStalled = set.NewCounter(name("sipedge_tcp_stalled_total", ""))
	m.tcpConns = set.NewCounter(name("sipedge_tcp_connections", ""))
	m.timers = set.NewGauge(name("sipedge_shard_timers", ""), nil)
	m.floodDropped = set.NewCounter(name("sipedge_flood_dropped_total", ""))
	m.floodBans = set.NewCounter(name("sipedge_flood_bans_total", ""))
	m.batchIntervals = set.NewCounter(name("sipedge_shard_batch_intervals_total", ""))
	return m
}

func (m *shardMetrics) countIn(msg *parser.Message) {
	if msg.IsResponse() {
		m.responsesIn[msg.StatusCode()/100].Inc()
		return
	}
	if c := m.requestsIn[msg.Method()]; c != nil {
		c.Inc()
	}
}

// countOut classifies an outgoing message by its first bytes.
func (m *shardMetrics) countOut(b []byte) {
	if len(b) > 8 && string(b[:8]) == "SIP/2.0 " {
		if class := int(b[8] - '0'); class >= 1 && class <= 6 {
			m.responsesOut[class].Inc()
		}
		return
	}
	end := 0
	for end < len(b) && end < 16 && b[end] != ' ' {
		end++
	}
	if c := m.requestsOut[parser.LookupMethod(b[:end])]; c != nil {
		c.Inc()
	}
}

// countParseError counts a malformed request by the code it is (or would
// be) answered with, a malformed response as dropped.
func (m *shardMetrics) countParseError(code int, response bool) {
	if response {
		m.droppedResp.Inc()
		return
	}
	for i, c := range parseErrorCodes {
		if c == code {
			m.parseErrors[i].Inc()
			return
		}
	}
	m.parseErrors[len(parseErrorCodes)].Inc()
}
