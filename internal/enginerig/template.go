package enginerig

import (
	"strconv"
	"strings"
)

// Template is a message with holes, filled into a caller-owned buffer
// without an allocation: $n is a number (a call's), $t a tag.
type Template struct {
	parts []string
	holes []byte // holes[i] follows parts[i]: 'n' or 't'
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
		case 't':
			dst = append(dst, tag...)
		}
	}
	return dst
}
