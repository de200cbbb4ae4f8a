package config

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Expansion happens inside scalars, after the YAML is parsed, so that a
// variable's value is only ever the text of the scalar it stands in: a
// secret holding " #", ": ", a newline or a quote can neither cut the value
// short nor add keys. It takes two steps:
//
//  1. mark, on the raw text: each ${VAR} or ${VAR:-default} is replaced by
//     a placeholder made of letters, digits and _, which YAML reads as part
//     of a scalar wherever the reference stood (unquoted in [..] or {..}
//     too, where the braces of ${ would be syntax), and $$ by $. Lines that
//     are only a comment are copied untouched, so a commented-out ${VAR}
//     needs no value; bad references are errors with their line.
//  2. expand, on the parsed tree: the placeholders in every scalar, keys
//     included, are replaced by the values. A plain (unquoted, untagged)
//     scalar is then typed again from its new text, as if written there:
//     shards: ${N} is a number, a variable set to "" leaves the key unset.

// envRef is one ${VAR} or ${VAR:-default} of the text.
type envRef struct {
	text   string // as written, for errors
	name   string
	def    string
	hasDef bool
	line   int
}

// expander holds the references mark found for expand.
type expander struct {
	env  func(string) (string, bool)
	stem string // starts every placeholder; absent from the raw text
	refs []envRef
	errs ErrorList
}

// placeholderStem returns a stem that occurs nowhere in data. Its first
// byte, X, occurs nowhere else in a placeholder (stem, digits, _), so text
// around a placeholder cannot form a stem with it.
func placeholderStem(data []byte) string {
	for i := 0; ; i++ {
		stem := "Xsipedgeenv" + strconv.Itoa(i) + "_"
		if !bytes.Contains(data, []byte(stem)) {
			return stem
		}
	}
}

// mark returns data with the references replaced by placeholders (stem,
// index into refs, _) and $$ by $. A $ followed by anything else is kept.
func (x *expander) mark(data []byte) []byte {
	if bytes.IndexByte(data, '$') < 0 {
		return data
	}
	x.stem = placeholderStem(data)
	var out bytes.Buffer
	out.Grow(len(data))
	line := 1
	for len(data) > 0 {
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i+1], data[i+1:]
		} else {
			l, data = data, nil
		}
		if t := bytes.TrimLeft(l, " \t"); len(t) > 0 && t[0] == '#' {
			out.Write(l)
		} else {
			x.markLine(&out, l, line)
		}
		line++
	}
	return out.Bytes()
}

func (x *expander) markLine(out *bytes.Buffer, l []byte, line int) {
	for {
		i := bytes.IndexByte(l, '$')
		if i < 0 || i == len(l)-1 {
			out.Write(l)
			return
		}
		out.Write(l[:i])
		switch l[i+1] {
		case '$':
			out.WriteByte('$')
			l = l[i+2:]
			continue
		case '{':
		default:
			out.WriteByte('$')
			l = l[i+1:]
			continue
		}
		end := bytes.IndexByte(l[i:], '}')
		if end < 0 {
			x.errs = append(x.errs, &Error{Line: line, Msg: fmt.Sprintf("%q: unterminated ${", strings.TrimRight(string(l[i:]), "\r\n"))})
			return
		}
		ref := string(l[i : i+end+1])
		name, def, hasDef := strings.Cut(ref[2:len(ref)-1], ":-")
		l = l[i+end+1:]
		if !validVarName(name) {
			x.errs = append(x.errs, &Error{Line: line, Msg: fmt.Sprintf("%s: invalid variable name %q", ref, name)})
			continue
		}
		out.WriteString(x.stem + strconv.Itoa(len(x.refs)) + "_")
		x.refs = append(x.refs, envRef{text: ref, name: name, def: def, hasDef: hasDef, line: line})
	}
}

// expand replaces the placeholders in every scalar under n, path being
// n's field path for errors. Aliases are not followed: the anchored node
// is expanded where it is written.
func (x *expander) expand(n *yaml.Node, path string) {
	if len(x.refs) == 0 {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			x.expand(c, path)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			x.expand(c, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			x.expand(k, path)
			x.expand(v, mapKeyPath(path, k.Value))
		}
	case yaml.ScalarNode:
		x.expandScalar(n, path)
	}
}

func (x *expander) expandScalar(n *yaml.Node, path string) {
	s := n.Value
	if !strings.Contains(s, x.stem) {
		return
	}
	var b strings.Builder
	for {
		i := strings.Index(s, x.stem)
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i+len(x.stem):]
		j := strings.IndexByte(s, '_')
		idx, err := strconv.Atoi(s[:max(j, 0)])
		if j < 0 || err != nil || idx >= len(x.refs) {
			// Not a placeholder of ours (only a quoted escape can
			// spell a stem): keep the text.
			b.WriteString(x.stem)
			continue
		}
		s = s[j+1:]
		r := x.refs[idx]
		v, ok := x.env(r.name)
		switch {
		case r.hasDef && v == "":
			v = r.def
		case !ok:
			x.errs = append(x.errs, &Error{Line: r.line, Path: path, Msg: fmt.Sprintf("%s: environment variable %s is not set (use ${%s:-default} for a default)", r.text, r.name, r.name)})
		}
		b.WriteString(v)
	}
	n.Value = b.String()
	if n.Style&(yaml.TaggedStyle|yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		n.Tag = ""
		n.Tag = n.ShortTag()
	}
}

func validVarName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
