package txn

// The slab holds the transaction slots in chunks of chunkSlots. Growing adds
// a chunk and never moves a slot: a doubling array copies every slot it has
// and leaves the old array, pointers and all, for the collector to scan and
// free. That was half of what a table allocated while a load filled it,
// the first 32 s at a steady rate (Timers J, L and M hold transactions that
// long; docs/design/wire.md 9). A slot's address also stays put for its
// life, so a *txn taken before an alloc is still good after it.
const (
	chunkBits  = 8
	chunkSlots = 1 << chunkBits
)

type slab struct {
	chunks []*[chunkSlots]txn
	n      int32 // slots 0 to n-1 exist
}

// at returns slot i, which must exist.
func (s *slab) at(i int32) *txn { return &s.chunks[i>>chunkBits][i&(chunkSlots-1)] }

func (s *slab) len() int { return int(s.n) }

// cap is the slots the chunks hold, used or not.
func (s *slab) cap() int { return len(s.chunks) * chunkSlots }

// reserve makes room for n slots.
func (s *slab) reserve(n int) {
	for s.cap() < n {
		s.chunks = append(s.chunks, new([chunkSlots]txn))
	}
}

// add appends slot x and returns its index.
func (s *slab) add(x txn) int32 {
	s.reserve(s.len() + 1)
	i := s.n
	s.n++
	*s.at(i) = x
	return i
}

// truncate keeps the first n slots, and chunks enough to hold keep slots
// (n at least); the other chunks go to the collector.
func (s *slab) truncate(n int32, keep int) {
	for i := n; i < s.n; i++ {
		*s.at(i) = txn{}
	}
	s.n = n
	chunks := (keep + chunkSlots - 1) / chunkSlots
	clear(s.chunks[chunks:])
	s.chunks = s.chunks[:chunks]
}
