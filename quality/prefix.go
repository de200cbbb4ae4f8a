package quality

// Prefix is a quality prefix: its index in the configuration's prefixes,
// or NoPrefix. Monitor.Prefix finds it for a dialled number; the call then
// passes it to every other call path function.
type Prefix int32

// NoPrefix is the Prefix of a number that no quality prefix matches (there
// is no "" prefix): its attempts count nowhere and its routes keep their
// order.
const NoPrefix Prefix = -1

// prefixTrie finds the longest quality prefix of a number, as
// route/lcr's static table does: a digit trie.
type prefixTrie struct {
	nodes []prefixNode
}

// prefixNode is a node of the trie: next[d] is the child for digit d (0:
// none; the root is nobody's child), prefix the quality prefix ending here.
type prefixNode struct {
	next   [10]int32
	prefix Prefix
}

// newPrefixTrie builds the trie of digits (prefixes without their '+',
// valid and distinct).
func newPrefixTrie(digits []string) *prefixTrie {
	t := &prefixTrie{nodes: []prefixNode{{prefix: NoPrefix}}}
	for i, p := range digits {
		n := int32(0)
		for j := 0; j < len(p); j++ {
			d := p[j] - '0'
			next := t.nodes[n].next[d]
			if next == 0 {
				next = int32(len(t.nodes))
				t.nodes = append(t.nodes, prefixNode{prefix: NoPrefix})
				t.nodes[n].next[d] = next
			}
			n = next
		}
		t.nodes[n].prefix = Prefix(i)
	}
	return t
}

// match returns the longest prefix of number; a leading '+' is ignored and
// the match stops at the first character that is not a digit. It does not
// allocate.
func (t *prefixTrie) match(number string) Prefix { return matchTrie(t.nodes, number) }

// matchTrie is match over a string or the bytes of one: the call core
// holds the dialled number as bytes, which a conversion would copy.
func matchTrie[T string | []byte](nodes []prefixNode, number T) Prefix {
	if len(number) > 0 && number[0] == '+' {
		number = number[1:]
	}
	n := int32(0)
	best := nodes[0].prefix
	for i := 0; i < len(number); i++ {
		d := number[i] - '0'
		if d > 9 {
			break
		}
		n = nodes[n].next[d]
		if n == 0 {
			break
		}
		if p := nodes[n].prefix; p != NoPrefix {
			best = p
		}
	}
	return best
}
