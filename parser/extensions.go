package parser

// The header values of the SIP extensions a B2BUA takes part in: reliable
// provisional responses (RFC 3262) and session timers (RFC 4028). Each
// parser reads a value as Get returns it (trimmed), without allocating.

// Parse errors of the extension headers.
var (
	ErrBadRSeq           = newError(400, "Bad RSeq")
	ErrBadRAck           = newError(400, "Bad RAck")
	ErrBadSessionExpires = newError(400, "Bad Session-Expires")
	ErrBadMinSE          = newError(400, "Bad Min-SE")
)

// ParseRSeq parses an RSeq value, 1*DIGIT from 1 to 2**32-1 (RFC 3262 7.1).
func ParseRSeq(b []byte) (uint32, error) {
	n, ok := parseDelta(b, maxUint32)
	if !ok || n == 0 {
		return 0, ErrBadRSeq
	}
	return uint32(n), nil
}

// RAck is a parsed RAck value (RFC 3262 7.2): the RSeq of the provisional
// response it acknowledges and the CSeq of the request that response
// answered.
type RAck struct {
	RSeq   uint32
	CSeq   uint32
	Method Method
	// MethodRaw is the method as written.
	MethodRaw []byte
}

// ParseRAck parses response-num LWS CSeq-num LWS Method.
func ParseRAck(b []byte) (RAck, error) {
	var r RAck
	i := skipLWS(b, 0)
	s := i
	n, i, ok := readDigits(b, i, maxUint32)
	if !ok || i == s || n == 0 || i == len(b) || byteClass[b[i]]&classWS == 0 {
		return r, ErrBadRAck
	}
	c, err := ParseCSeq(b[i:])
	if err != nil {
		return r, ErrBadRAck
	}
	r.RSeq, r.CSeq, r.Method, r.MethodRaw = uint32(n), c.Num, c.Method, c.MethodRaw
	return r, nil
}

// Refresher says who refreshes a session (RFC 4028 4): the refresher
// parameter of Session-Expires.
type Refresher uint8

const (
	RefresherNone Refresher = iota // no refresher parameter
	RefresherUAC                   // refresher=uac
	RefresherUAS                   // refresher=uas
)

// SessionExpires is a parsed Session-Expires value (RFC 4028 4).
type SessionExpires struct {
	Delta     uint32 // delta-seconds
	Refresher Refresher
}

// ParseSessionExpires parses delta-seconds *(SEMI se-params), the refresher
// parameter uac or uas (case-insensitive, RFC 4028 4); other parameters are
// allowed and ignored.
func ParseSessionExpires(b []byte) (SessionExpires, error) {
	var se SessionExpires
	delta, params, ok := deltaParams(b)
	if !ok {
		return se, ErrBadSessionExpires
	}
	se.Delta = delta
	if params == nil {
		return se, nil
	}
	if _, err := checkParams(params); err != nil {
		return se, ErrBadSessionExpires
	}
	if v, ok := paramLookup(params, "refresher"); ok {
		switch {
		case equalFold(v, "uac"):
			se.Refresher = RefresherUAC
		case equalFold(v, "uas"):
			se.Refresher = RefresherUAS
		default:
			return se, ErrBadSessionExpires
		}
	}
	return se, nil
}

// ParseMinSE parses a Min-SE value, delta-seconds *(SEMI generic-param)
// (RFC 4028 5), and returns its delta-seconds.
func ParseMinSE(b []byte) (uint32, error) {
	delta, params, ok := deltaParams(b)
	if !ok {
		return 0, ErrBadMinSE
	}
	if params != nil {
		if _, err := checkParams(params); err != nil {
			return 0, ErrBadMinSE
		}
	}
	return delta, nil
}

// deltaParams splits delta-seconds [LWS] [SEMI params]: the number and the
// parameters after the first ';' (nil when there are none).
func deltaParams(b []byte) (delta uint32, params []byte, ok bool) {
	i := skipLWS(b, 0)
	s := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	n, ok := parseUint(b[s:i], maxUint32)
	if !ok {
		return 0, nil, false
	}
	i = skipLWS(b, i)
	switch {
	case i == len(b):
		return uint32(n), nil, true
	case b[i] != ';':
		return 0, nil, false
	}
	return uint32(n), b[i+1:], true
}
