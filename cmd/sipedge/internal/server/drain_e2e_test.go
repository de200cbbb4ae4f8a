package server

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/parser"
)

// A drain that finishes its work, end to end: the calls still up at the
// drain timeout are ended, and sipedge stops only once the transactions
// that ended them are answered (b2bua.drain_linger_secs bounds the wait).
// The callers are SIPp (testdata/sipp/uac.xml, each call held for a
// minute), which answers the BYE sipedge sends it (SIPp's answer to an
// unexpected BYE).

// newDrainRig starts a Server for SIPp callers, drain_timeout_secs 1,
// routing every call to the gateway group carrier-x of the one member at
// carrier, with more keys (YAML flow-map entries) for the group.
func newDrainRig(t *testing.T, carrier netip.AddrPort, groupKeys string) *lcrRig {
	t.Helper()
	g := "    - name: carrier-x\n"
	if groupKeys != "" {
		g += "      " + groupKeys + "\n"
	}
	g += fmt.Sprintf("      destinations:\n        - { uri: \"sip:%[1]s\", address: \"%[1]s\" }\n", carrier)
	return newSIPpRig(t, "gateway:\n  groups:\n"+g,
		staticLCR(`{ carrier_id: carrier-x, gateway_group: carrier-x, rate: 0.001 }`))
}

// upCalls starts a SIPp caller placing calls calls at rate a second, each
// held a minute once answered, and waits until sipedge holds them all.
func (r *lcrRig) upCalls(calls, rate int) *sipp {
	r.t.Helper()
	caller := sippCaller(r.t, "caller", r.sip, []string{"15551234"}, rate, calls, time.Minute)
	deadline := time.Now().Add(time.Duration(calls/rate)*time.Second + 10*time.Second)
	for r.srv.LiveCalls() < calls {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d of %d calls up", r.srv.LiveCalls(), calls)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the last ACKs
	return caller
}

// byeDropper is a carrier for many calls at once: it answers every INVITE
// 200 with SDP, loses the first BYE of each dialog (no answer), and
// answers the BYE's retransmission 200, noting when.
type byeDropper struct {
	conn *net.UDPConn
	done chan struct{}

	mu    sync.Mutex
	calls map[string]*droppedCall // by Call-ID
}

type droppedCall struct {
	byes     int       // BYEs received, retransmissions included
	answered time.Time // when its BYE was answered; zero if it was not
}

func newByeDropper(t *testing.T) *byeDropper {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	d := &byeDropper{conn: c, done: make(chan struct{}), calls: map[string]*droppedCall{}}
	go d.serve(t)
	t.Cleanup(func() { c.Close(); <-d.done })
	return d
}

func (d *byeDropper) addr() netip.AddrPort { return d.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

func (d *byeDropper) serve(t *testing.T) {
	defer close(d.done)
	buf := make([]byte, 65536)
	const sdp = "v=0\r\no=- 2 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 6000 RTP/AVP 0\r\n"
	contact := fmt.Sprintf("Contact: <sip:%s>\r\n", d.addr())
	for {
		n, from, err := d.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		var m parser.Message
		if m.Parse(bytes.Clone(buf[:n])) != nil || m.IsResponse() {
			continue
		}
		id := string(m.CallID())
		var resp []byte
		d.mu.Lock()
		c := d.calls[id]
		if c == nil {
			c = &droppedCall{}
			d.calls[id] = c
		}
		switch m.Method() {
		case parser.MethodInvite:
			resp = parser.AppendResponse(nil, &m, 200, "OK", []byte("dropper"))
			resp = append(resp, contact+"Content-Type: application/sdp\r\n"...)
			resp = parser.AppendBody(resp, "", []byte(sdp))
		case parser.MethodBye:
			if c.byes++; c.byes > 1 {
				resp = parser.AppendBody(parser.AppendResponse(nil, &m, 200, "OK", nil), "", nil)
				if c.answered.IsZero() {
					c.answered = time.Now()
				}
			}
		}
		d.mu.Unlock()
		if resp != nil {
			d.conn.WriteToUDPAddrPort(resp, from)
		}
	}
}

// TestDrainLingersForRetransmittedByes: 100 calls up at the drain
// timeout, and a carrier that loses the first BYE of every call. sipedge
// ends the calls and runs on until every BYE is answered: each carrier leg
// gets its BYE again (Timer E, T1 later) and answers it before Shutdown
// returns, and the caller's BYEs are answered too (every transaction
// settled, well within the linger bound). Each call has its CDR, hung up by
// the system.
func TestDrainLingersForRetransmittedByes(t *testing.T) {
	testtier.RequiresSockets(t)
	const calls, rate = 100, 100
	carrier := newByeDropper(t)
	r := newDrainRig(t, carrier.addr(), "")
	r.upCalls(calls, rate)

	start := time.Now()
	if err := r.shutdown(); err != nil {
		t.Fatal(err)
	}
	returned := time.Now()
	t.Logf("Shutdown took %v:\n%s", returned.Sub(start).Round(time.Millisecond), grepLines(r.logs.String(), "drain"))
	carrier.mu.Lock()
	answered, late, once := 0, 0, 0
	for _, c := range carrier.calls {
		switch {
		case c.byes < 2:
			once++
		case c.answered.IsZero() || c.answered.After(returned):
			late++
		default:
			answered++
		}
	}
	carrier.mu.Unlock()
	if answered != calls {
		t.Errorf("%d carrier legs answered their retransmitted BYE before Shutdown returned, want %d (%d got one BYE only, %d none answered in time)",
			answered, calls, once, late)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, `msg="drain: every transaction settled"`) {
		t.Errorf("sipedge did not log that every transaction settled:\n%s", lastLines(logs, 10))
	}
	codes := map[string]int{}
	for _, rec := range r.cdrs() {
		fc, _ := rec["final_code"].(float64)
		codes[fmt.Sprintf("%d %v", int(fc), rec["hangup_side"])]++
	}
	if want := fmt.Sprintf("map[200 system:%d]", calls); fmt.Sprint(codes) != want {
		t.Errorf("CDRs by final code and hangup side %v, want %s", codes, want)
	}
}

// TestDrainAnswersByeChallenges: calls up at the drain timeout through a
// SIPp carrier that challenges every BYE (bench/sipp/uas_auth.xml, which
// checks the credentials with verifyauth): sipedge ends the calls, answers
// each 401 with the group's account before it stops, and the carrier
// completes every call.
func TestDrainAnswersByeChallenges(t *testing.T) {
	testtier.RequiresSockets(t)
	const calls, rate = 50, 50
	carrier := runSIPp(t, "carrier", "-sf", filepath.Join(repoRoot(t), "bench", "sipp", "uas_auth.xml"), "-m", fmt.Sprint(calls))
	r := newDrainRig(t, carrier.addr(), `auth: { username: acct-42, password: "s3cret" }`)
	r.upCalls(calls, rate)
	if err := r.shutdown(); err != nil {
		t.Fatal(err)
	}
	var m bytes.Buffer
	r.srv.WriteMetrics(&m)
	if n, _ := metricIn(m.String(), "sipedge_carrier_auth_challenges_total", `result="answered"`); n != 2*calls {
		t.Errorf("%v challenges answered, want %d (each call's INVITE and BYE)", n, 2*calls)
	}
	carrier.wait(10 * time.Second) // it exits once its calls are complete
	if st := carrier.stats(); st.succeeded != calls || st.failed != 0 {
		t.Errorf("SIPp carrier: %+v, want %d calls completed, their BYEs authenticated", st, calls)
	}
	if logs := r.logs.String(); !strings.Contains(logs, `msg="drain: every transaction settled"`) {
		t.Errorf("sipedge did not log that every transaction settled:\n%s", lastLines(logs, 10))
	}
}

// repoRoot is the repository's top directory, four above this package's.
func repoRoot(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
