package lcr

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/sipedge/sipedge/route"
)

// ErrInvalidTable is wrapped by the errors of NewStaticTable.
var ErrInvalidTable = errors.New("lcr: invalid static table")

// StaticEntry is one prefix of a static rate table and its carriers.
type StaticEntry struct {
	// Prefix is digits with an optional leading '+', which is ignored:
	// "+44" and "44" are the same prefix. "" matches every number.
	Prefix string
	// Routes are the carriers for numbers under Prefix, in any order: the
	// table orders them by rate. An empty list is a block: numbers under
	// Prefix get no route even if a shorter prefix has some.
	Routes []route.Route
}

// StaticTable is the embedded rate table used when no routing API is
// configured: the longest prefix of the dialled number wins, and its routes
// are ordered by rate, cheapest first (equal rates keep their order). It is
// immutable once built and safe for concurrent use; Lookup does not
// allocate.
type StaticTable struct {
	nodes    []trieNode
	entries  [][]route.Route
	prefixes []string // by entry: its prefix as given
}

// trieNode is a node of the digit trie. next[d] is the index of the child
// for digit d, 0 for none (the root, index 0, is nobody's child). entry is
// the index in entries of the routes of the prefix ending here, -1 for none.
type trieNode struct {
	next  [10]int32
	entry int32
}

// NewStaticTable builds a table from entries. The routes are copied (the
// Route values, not their maps and slices, which the table then shares and
// never modifies) and validated as the API's are (ValidateRoute). A prefix
// that is not digits, or that appears twice, is an error.
func NewStaticTable(entries []StaticEntry) (*StaticTable, error) {
	t := &StaticTable{nodes: []trieNode{newTrieNode()}}
	for i := range entries {
		e := &entries[i]
		p := trimPlus(e.Prefix)
		for j := 0; j < len(p); j++ {
			if p[j] < '0' || p[j] > '9' {
				return nil, fmt.Errorf("%w: prefix %q is not digits", ErrInvalidTable, e.Prefix)
			}
		}
		routes := slices.Clone(e.Routes)
		if routes == nil {
			routes = []route.Route{}
		}
		for j := range routes {
			if err := ValidateRoute(&routes[j]); err != nil {
				return nil, fmt.Errorf("%w: prefix %q: routes[%d]: %w", ErrInvalidTable, e.Prefix, j, err)
			}
		}
		slices.SortStableFunc(routes, func(a, b route.Route) int { return cmp.Compare(a.Rate, b.Rate) })
		n := int32(0)
		for j := 0; j < len(p); j++ {
			d := p[j] - '0'
			next := t.nodes[n].next[d]
			if next == 0 {
				next = int32(len(t.nodes))
				t.nodes = append(t.nodes, newTrieNode())
				t.nodes[n].next[d] = next
			}
			n = next
		}
		if t.nodes[n].entry >= 0 {
			return nil, fmt.Errorf("%w: prefix %q appears twice", ErrInvalidTable, e.Prefix)
		}
		t.nodes[n].entry = int32(len(t.entries))
		t.entries = append(t.entries, routes)
		t.prefixes = append(t.prefixes, e.Prefix)
	}
	return t, nil
}

func newTrieNode() trieNode { return trieNode{entry: -1} }

func trimPlus(s string) string {
	if len(s) > 0 && s[0] == '+' {
		return s[1:]
	}
	return s
}

// Lookup returns the routes of the longest prefix of number, cheapest first,
// and whether a prefix matched. A leading '+' of number is ignored; the
// match stops at the first character that is not a digit. The slice is the
// table's: read it, do not modify it (clone it to filter or reorder). A nil
// table matches nothing.
func (t *StaticTable) Lookup(number string) ([]route.Route, bool) {
	if i := t.match(number); i >= 0 {
		return t.entries[i], true
	}
	return nil, false
}

// Match is Lookup, with the prefix that matched as its entry gave it: a
// dry run shows which one routed the number.
func (t *StaticTable) Match(number string) (prefix string, routes []route.Route, ok bool) {
	if i := t.match(number); i >= 0 {
		return t.prefixes[i], t.entries[i], true
	}
	return "", nil, false
}

// match returns the entry of the longest prefix of number, -1 for none.
func (t *StaticTable) match(number string) int32 {
	if t == nil {
		return -1
	}
	s := trimPlus(number)
	nodes := t.nodes
	n := int32(0)
	best := nodes[0].entry
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			break
		}
		n = nodes[n].next[d]
		if n == 0 {
			break
		}
		if e := nodes[n].entry; e >= 0 {
			best = e
		}
	}
	return best
}

// Len returns the number of prefixes in the table.
func (t *StaticTable) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}
