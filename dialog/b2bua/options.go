package b2bua

// optionTags are the SIP extensions sipedge implements, each leg on its
// own (RFC 3261 19.2): reliable provisional responses (RFC 3262, rel.go)
// and session timers (RFC 4028, sessiontimer.go).
var optionTags = [...]string{"100rel", "timer"}

// allowHeader lists the methods sipedge handles (RFC 3261 20.5): those it
// answers or relays. Not REFER, which it refuses (Config.ReferCode).
const allowHeader = "Allow: INVITE, ACK, CANCEL, BYE, OPTIONS, UPDATE, INFO, PRACK, NOTIFY\r\n"

// capabilities are the header lines of sipedge's 200 to an OPTIONS
// outside a dialog (RFC 3261 11.2): the methods it handles, the body it
// takes in an INVITE (the SDP it relays), and its option tags
// (optionTags).
const capabilities = allowHeader + "Accept: application/sdp\r\nSupported: 100rel, timer\r\n"

// OptionTags returns the option tags of the extensions sipedge implements:
// what a request may Require of it, a request requiring another being
// refused 420 (RFC 3261 8.2.2.3; the runtime's parser.Validate). A fresh
// slice.
func OptionTags() []string { return append([]string(nil), optionTags[:]...) }
