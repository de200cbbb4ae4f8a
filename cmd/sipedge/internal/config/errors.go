package config

import (
	"sort"
	"strconv"
	"strings"
)

// Error is one problem with the configuration.
type Error struct {
	File string // set by Load
	Line int    // 1-based line in the file; 0 when unknown
	// Path is the field, e.g. "gateway.groups[1].destinations[0].address";
	// "" for a problem with the text itself.
	Path string
	Msg  string // why
}

// Error formats the problem as "FILE:LINE: PATH: MSG" (Load) or
// "line LINE: PATH: MSG" (Parse), leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(e.File + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found, in file order. Load and Parse return
// one (as error) when anything is wrong.
type ErrorList []*Error

// Error joins the problems, one a line.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the problems for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

func (l ErrorList) sort() {
	sort.SliceStable(l, func(i, j int) bool { return l[i].Line < l[j].Line })
}
