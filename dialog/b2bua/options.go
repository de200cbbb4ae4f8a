package b2bua

// optionTags are the SIP extensions sipedge implements, each leg on its
// own (RFC 3261 19.2): reliable provisional responses (RFC 3262, rel.go).
var optionTags = [...]string{"100rel"}

// OptionTags returns the option tags of the extensions sipedge implements:
// what a request may Require of it, a request requiring another being
// refused 420 (RFC 3261 8.2.2.3; the runtime's parser.Validate). A fresh
// slice.
func OptionTags() []string { return append([]string(nil), optionTags[:]...) }
