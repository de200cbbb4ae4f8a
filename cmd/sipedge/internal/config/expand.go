package config

import (
	"bytes"
	"fmt"
	"strings"
)

// expand replaces ${VAR} and ${VAR:-default} in the raw text with values
// from env, and $$ with $. ${VAR:-default} takes the default when VAR is
// unset or empty; an unset ${VAR} without a default is an error naming the
// variable and the line. A $ followed by anything else is kept as it is.
// Lines that are only a comment are copied untouched, so a commented-out
// ${VAR} needs no value.
func expand(data []byte, env func(string) (string, bool)) ([]byte, ErrorList) {
	if bytes.IndexByte(data, '$') < 0 {
		return data, nil
	}
	var out bytes.Buffer
	out.Grow(len(data))
	var errs ErrorList
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
			errs = append(errs, expandLine(&out, l, line, env)...)
		}
		line++
	}
	return out.Bytes(), errs
}

func expandLine(out *bytes.Buffer, l []byte, line int, env func(string) (string, bool)) ErrorList {
	var errs ErrorList
	for {
		i := bytes.IndexByte(l, '$')
		if i < 0 || i == len(l)-1 {
			out.Write(l)
			return errs
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
			errs = append(errs, &Error{Line: line, Msg: fmt.Sprintf("%q: unterminated ${", strings.TrimRight(string(l[i:]), "\r\n"))})
			return errs
		}
		ref := string(l[i : i+end+1])
		body := ref[2 : len(ref)-1]
		name, def, hasDef := strings.Cut(body, ":-")
		l = l[i+end+1:]
		if !validVarName(name) {
			errs = append(errs, &Error{Line: line, Msg: fmt.Sprintf("%s: invalid variable name %q", ref, name)})
			continue
		}
		v, ok := env(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			errs = append(errs, &Error{Line: line, Msg: fmt.Sprintf("%s: environment variable %s is not set (use ${%s:-default} for a default)", ref, name, name)})
			continue
		}
		out.WriteString(v)
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
