package shard

import "sync/atomic"

// ring is a bounded single-producer single-consumer queue of packets: the
// producer is one shard's loop, the consumer another's. Push and pop are an
// atomic load and store each; no mutex is taken.
type ring struct {
	_    [64]byte // keep head and tail on their own cache lines
	head atomic.Uint64
	_    [56]byte
	tail atomic.Uint64
	_    [56]byte
	mask uint64
	buf  []*packet
}

func newRing(size int) *ring {
	n := 1
	for n < size {
		n <<= 1
	}
	return &ring{mask: uint64(n - 1), buf: make([]*packet, n)}
}

// push appends p; it reports false when the ring is full. Producer only.
func (r *ring) push(p *packet) bool {
	t := r.tail.Load()
	if t-r.head.Load() > r.mask {
		return false
	}
	r.buf[t&r.mask] = p
	r.tail.Store(t + 1)
	return true
}

// pop removes the oldest packet, or returns nil. Consumer only.
func (r *ring) pop() *packet {
	h := r.head.Load()
	if h == r.tail.Load() {
		return nil
	}
	p := r.buf[h&r.mask]
	r.buf[h&r.mask] = nil
	r.head.Store(h + 1)
	return p
}
