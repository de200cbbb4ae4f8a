package parser

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// supportedTags are the option tags the conformance verdicts assume a server supports.
var supportedTags = []string{"100rel", "timer", "replaces"}

// verdict runs what a server runs on a received datagram and says it the way
// `sipedge check-msg` does.
func verdict(buf []byte) string {
	var m Message
	err := m.Parse(buf)
	if err == nil {
		err = m.Validate(supportedTags)
	}
	if err != nil {
		code, reason, drop := Answer(&m, err)
		if drop {
			return "drop " + reason
		}
		return fmt.Sprintf("reject %d %s", code, reason)
	}
	if m.IsResponse() {
		return fmt.Sprintf("ok %d", m.StatusCode())
	}
	return "ok " + string(m.MethodBytes())
}

// TestRFC4475 checks every torture message against the verdict of
// testdata/rfc4475/INDEX.md. Where the RFC leaves a choice, the comment says
// which one sipedge makes.
func TestRFC4475(t *testing.T) {
	want := map[string]string{
		// 3.1.1: valid messages.
		"wsinv":      "ok INVITE",
		"intmeth":    "ok !interesting-Method0123456789_*+`.%indeed'~",
		"esc01":      "ok INVITE",
		"escnull":    "ok REGISTER",
		"esc02":      "ok RE%47IST%45R",
		"lwsdisp":    "ok OPTIONS",
		"longreq":    "ok INVITE",
		"dblreq":     "ok REGISTER",
		"semiuri":    "ok OPTIONS",
		"transports": "ok OPTIONS",
		"mpart01":    "ok MESSAGE",
		"unreason":   "ok 200",
		"noreason":   "ok 100",
		// 3.1.2: invalid messages.
		"badinv01":   "reject 400",
		"clerr":      "reject 400",
		"ncl":        "reject 400",
		"scalar02":   "reject 400",
		"scalarlg":   "drop",
		"quotbal":    "reject 400",
		"ltgtruri":   "reject 400",
		"lwsruri":    "reject 400",
		"lwsstart":   "reject 400",
		"trws":       "reject 400",
		"escruri":    "reject 400",
		"baddate":    "ok INVITE", // Date is not used, so it is ignored
		"regbadct":   "reject 400",
		"badaspec":   "reject 400",
		"baddn":      "reject 400",
		"badvers":    "reject 505",
		"mismatch01": "reject 400",
		"mismatch02": "reject 400", // 400 acceptable per RFC 4475 3.1.2.18
		"bigcode":    "drop",
		// 3.2-3.4: transaction and application layer.
		"badbranch": "reject 400", // stateless 400 rather than RFC 2543 matching of a cookie-only branch
		"insuf":     "reject 400",
		"unkscm":    "reject 416",
		"novelsc":   "reject 416",
		"unksm2":    "ok REGISTER", // not a registrar: the From/To schemes do not matter here
		"bext01":    "reject 420",
		"invut":     "ok INVITE", // Content-Type is the endpoint's business (415)
		"regaut01":  "ok REGISTER",
		"multi01":   "reject 400",
		"mcl01":     "reject 400",
		"bcast":     "ok 200",
		"zeromf":    "ok OPTIONS", // the B2BUA answers 483 when it would forward
		"cparam01":  "ok REGISTER",
		"cparam02":  "ok REGISTER",
		"regescrt":  "ok REGISTER",
		"sdp01":     "ok INVITE",
		"inv2543":   "ok INVITE",
		"test":      "reject 400",
	}
	files, err := filepath.Glob("testdata/rfc4475/*.dat")
	if err != nil || len(files) != len(want) {
		t.Fatalf("corpus has %d files, table %d (%v)", len(files), len(want), err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".dat")
		buf, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := verdict(buf)
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no expected verdict", name)
			continue
		}
		if !strings.HasPrefix(got, w) {
			t.Errorf("%s: got %q, want %q", name, got, w)
		}
		if strings.HasPrefix(got, "ok") {
			checkRoundTrip(t, name, buf)
		}
	}
}

// checkRoundTrip parses buf, rebuilds it with the builder, parses the result
// and compares every field.
func checkRoundTrip(t *testing.T, name string, buf []byte) {
	t.Helper()
	var m1, m2 Message
	if err := m1.Parse(buf); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out := AppendStartLine(nil, &m1)
	out = AppendHeaders(out, &m1, 0)
	out = AppendBody(out, "", m1.Body())
	if err := m2.Parse(out); err != nil {
		t.Fatalf("%s: rebuilt message does not parse: %v\n%s", name, err, out)
	}
	if err := sameMessage(&m1, &m2); err != nil {
		t.Errorf("%s: round trip: %v\n%s", name, err, out)
	}
}

// sameMessage compares start lines, header kinds and values, and bodies.
func sameMessage(a, b *Message) error {
	if a.IsResponse() != b.IsResponse() || a.StatusCode() != b.StatusCode() ||
		string(a.MethodBytes()) != string(b.MethodBytes()) || string(a.RequestURI()) != string(b.RequestURI()) ||
		string(a.ReasonPhrase()) != string(b.ReasonPhrase()) {
		return fmt.Errorf("start line differs")
	}
	var ha, hb []Header
	for i := 0; i < a.NumHeaders(); i++ {
		if h := a.HeaderAt(i); h.Kind != HeaderContentLength {
			ha = append(ha, h)
		}
	}
	for i := 0; i < b.NumHeaders(); i++ {
		if h := b.HeaderAt(i); h.Kind != HeaderContentLength {
			hb = append(hb, h)
		}
	}
	if len(ha) != len(hb) {
		return fmt.Errorf("%d headers, then %d", len(ha), len(hb))
	}
	for i := range ha {
		if ha[i].Kind != hb[i].Kind || string(ha[i].Value) != string(hb[i].Value) {
			return fmt.Errorf("header %d: %q %q, then %q %q", i, ha[i].Name, ha[i].Value, hb[i].Name, hb[i].Value)
		}
	}
	if string(a.Body()) != string(b.Body()) {
		return fmt.Errorf("body differs")
	}
	return nil
}
