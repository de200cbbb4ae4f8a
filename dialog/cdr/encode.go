package cdr

import (
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// escUTF8 is the jsonEscape class of bytes 0x80-0xff: they are decoded as
// UTF-8, and each byte of an invalid sequence is written as \ufffd.
const escUTF8 = 1

// AppendJSON appends r as one JSON object, without a trailing newline, to dst
// and returns the extended buffer. It only reads r, does not allocate when
// dst has room and CDRFields has at most 32 keys, and may be called from any
// goroutine that owns r.
//
// Strings are escaped as encoding/json does without HTML escaping: quote,
// backslash and control characters are escaped (\n, \t, ... or \u00XX),
// U+2028 and U+2029 become \u2028 and \u2029, and every byte of invalid
// UTF-8 becomes \ufffd, so the output is always valid UTF-8 and valid JSON.
func (r *Record) AppendJSON(dst []byte) []byte {
	dst, _ = r.appendJSON(dst)
	return dst
}

// appendJSON is AppendJSON that also returns how many CDRFields keys were
// left out because they name built-in fields.
func (r *Record) appendJSON(dst []byte) ([]byte, int) {
	dst = append(dst, `{"a_call_id":`...)
	dst = appendString(dst, r.ACallID)
	dst = append(dst, `,"b_call_id":`...)
	dst = appendString(dst, r.BCallID)
	dst = append(dst, `,"trunk":`...)
	dst = appendString(dst, r.Trunk)
	dst = append(dst, `,"trunk_group":`...)
	dst = appendString(dst, r.TrunkGroup)
	dst = append(dst, `,"caller":`...)
	dst = appendString(dst, r.Caller)
	dst = append(dst, `,"callee":`...)
	dst = appendString(dst, r.Callee)
	dst = append(dst, `,"dialed_number":`...)
	dst = appendString(dst, r.DialedNumber)
	dst = append(dst, `,"source_ip":`...)
	switch ip := r.SourceIP.Unmap(); {
	case !ip.IsValid():
		dst = append(dst, `""`...)
	case ip.Zone() != "":
		dst = appendString(dst, ip.String()) // a zone is free text; allocates, link-local only
	default:
		dst = append(dst, '"')
		dst = ip.AppendTo(dst) // digits, dots, colons and hex: nothing to escape
		dst = append(dst, '"')
	}
	dst = appendTimeField(dst, `,"time_invite":"`, r.TimeInvite)
	dst = appendTimeField(dst, `,"time_first_provisional":"`, r.TimeFirstProvisional)
	dst = appendTimeField(dst, `,"time_answer":"`, r.TimeAnswer)
	dst = appendTimeField(dst, `,"time_end":"`, r.TimeEnd)
	dst = append(dst, `,"duration_ms":`...)
	dst = strconv.AppendInt(dst, r.DurationMS(), 10)
	if pdd, ok := r.PDDMS(); ok {
		dst = append(dst, `,"pdd_ms":`...)
		dst = strconv.AppendInt(dst, pdd, 10)
	}
	dst = append(dst, `,"final_code":`...)
	dst = strconv.AppendInt(dst, int64(r.FinalCode), 10)
	dst = append(dst, `,"final_reason":`...)
	dst = appendString(dst, r.FinalReason)
	dst = append(dst, `,"hangup_side":`...)
	dst = appendString(dst, r.HangupSide.String())
	if r.EndReason != "" {
		dst = append(dst, `,"end_reason":`...)
		dst = appendString(dst, r.EndReason)
	}
	dst = append(dst, `,"route":`...)
	dst = appendString(dst, r.Route)
	dst = append(dst, `,"carrier_id":`...)
	dst = appendString(dst, r.CarrierID)
	dst = append(dst, `,"rate":`...)
	dst = appendFloat(dst, r.Rate)
	dst = append(dst, `,"currency":`...)
	dst = appendString(dst, r.Currency)
	dst = append(dst, `,"route_source":`...)
	dst = appendString(dst, routeSourceName(r.RouteSource))
	dst = append(dst, `,"lcr_attempts":[`...)
	for i := range r.Attempts {
		a := &r.Attempts[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"carrier_id":`...)
		dst = appendString(dst, a.CarrierID)
		dst = append(dst, `,"status":`...)
		dst = strconv.AppendInt(dst, int64(a.Status), 10)
		dst = append(dst, `,"elapsed_ms":`...)
		dst = strconv.AppendInt(dst, max(a.Elapsed.Milliseconds(), 0), 10)
		dst = append(dst, `,"dialed":`...)
		dst = strconv.AppendBool(dst, a.Dialed)
		if a.Reason != "" {
			dst = append(dst, `,"reason":`...)
			dst = appendString(dst, a.Reason)
		}
		if a.BCallID != "" {
			dst = append(dst, `,"b_call_id":`...)
			dst = appendString(dst, a.BCallID)
		}
		dst = appendTimeField(dst, `,"time_invite":"`, a.TimeInvite)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	shadowed := 0
	if len(r.CDRFields) > 0 {
		var buf [32]string
		keys := buf[:0]
		for k := range r.CDRFields {
			if reserved(k) {
				shadowed++
				continue
			}
			keys = append(keys, k)
		}
		slices.Sort(keys) // stable output: the same record always encodes the same
		for _, k := range keys {
			dst = append(dst, ',')
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, r.CDRFields[k])
		}
	}
	return append(dst, '}'), shadowed
}

// DurationMS returns duration_ms: milliseconds from TimeAnswer to TimeEnd, 0
// when the call was not answered, has no end, or the end precedes the answer.
func (r *Record) DurationMS() int64 {
	if r.TimeAnswer.IsZero() || r.TimeEnd.IsZero() {
		return 0
	}
	return max(r.TimeEnd.Sub(r.TimeAnswer).Milliseconds(), 0)
}

// PDDMS returns pdd_ms, the post-dial delay: milliseconds from TimeInvite to
// TimeFirstProvisional. ok is false (and pdd_ms left out) when either is zero.
func (r *Record) PDDMS() (ms int64, ok bool) {
	if r.TimeInvite.IsZero() || r.TimeFirstProvisional.IsZero() {
		return 0, false
	}
	return max(r.TimeFirstProvisional.Sub(r.TimeInvite).Milliseconds(), 0), true
}

// appendString appends s as a JSON string; see AppendJSON for the escaping.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		e := jsonEscape[c]
		if e == 0 {
			i++
			continue
		}
		if e != escUTF8 {
			dst = append(dst, s[start:i]...)
			if e == 'u' {
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				dst = append(dst, '\\', e)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendTimeField appends key (which ends in an opening quote) and t, or
// nothing when t is zero.
func appendTimeField(dst []byte, key string, t time.Time) []byte {
	if t.IsZero() {
		return dst
	}
	dst = append(dst, key...)
	dst = appendTime(dst, t)
	return append(dst, '"')
}

// appendTime appends t in UTC as 2006-01-02T15:04:05.000Z. Milliseconds are
// truncated, as time.Format does.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / int(time.Millisecond)
	return append(dst,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+month/10), byte('0'+month%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// appendFloat appends f as encoding/json does, and null for a NaN or an
// infinity, which JSON cannot represent.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
