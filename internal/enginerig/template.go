package enginerig

import (
	"slices"
	"strconv"
	"strings"
)

// Template is a message with holes, filled into a caller-owned buffer
// without an allocation: $n is a number (a call's), $N the number in 12
// digits (every call's message then has one length), $t a tag.
type Template struct {
	parts []string
	holes []byte // holes[i] follows parts[i]: 'n', 'N' or 't'
}

// Compile makes s a Template.
func Compile(s string) Template {
	var t Template
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			t.parts = append(t.parts, s)
			return t
		}
		t.parts = append(t.parts, s[:i])
		t.holes = append(t.holes, s[i+1])
		s = s[i+2:]
	}
}

// Append appends the message with number n and tag tag.
func (t *Template) Append(dst []byte, n uint64, tag []byte) []byte {
	for i, p := range t.parts {
		dst = append(dst, p...)
		if i == len(t.holes) {
			break
		}
		switch t.holes[i] {
		case 'n':
			dst = strconv.AppendUint(dst, n, 10)
		case 'N':
			var digits [12]byte
			for k, m := len(digits)-1, n; k >= 0; k, m = k-1, m/10 {
				digits[k] = byte('0' + m%10)
			}
			dst = append(dst, digits[:]...)
		case 't':
			dst = append(dst, tag...)
		}
	}
	return dst
}

// Rewrite returns a copy of t with old replaced by new in its text and,
// when fixed, every $n written as $N.
func (t Template) Rewrite(old, new string, fixed bool) Template {
	w := Template{parts: make([]string, len(t.parts)), holes: slices.Clone(t.holes)}
	for i, p := range t.parts {
		w.parts[i] = strings.ReplaceAll(p, old, new)
	}
	for i, h := range w.holes {
		if fixed && h == 'n' {
			w.holes[i] = 'N'
		}
	}
	return w
}
