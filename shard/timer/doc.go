// Package timer is a hashed timer wheel for one shard event loop.
//
// Contract:
//
//   - Owner goroutine. A Wheel has no locks and starts no goroutines. Only
//     the goroutine that owns the shard may call its methods, including
//     from inside the fire callback. It is not safe for concurrent use.
//
//   - Clock. Time is a time.Duration since an origin the owner fixes, e.g.
//     time.Since(start) with start taken once, so it is monotonic. The owner
//     calls Advance(now) from its own loop; timers fire only inside Advance,
//     through the single callback given to New. Start(d) is relative to the
//     now of the last Advance, so Advance at the top of each loop iteration.
//
//   - Resolution. A timer fires in the first Advance whose now has reached its
//     deadline rounded up to the next tick: never early, at most one tick
//     late (plus however late the owner calls Advance). The default tick is
//     5ms. A timer whose deadline is not in the future fires at the next tick,
//     never inside Start. Within one Advance timers fire in deadline-tick
//     order, and in Start order within a tick, unless Advance jumps more than
//     a whole revolution, in which case all due timers fire in bucket order.
//
//   - Handles. Start returns a Handle packing slot index and a generation.
//     The generation changes when a timer fires or is stopped, so a stale
//     Handle can never stop the slot's next occupant. The zero Handle is
//     never valid. Generations are 32 bits; a Handle held across 2^32 reuses
//     of one slot could alias, which the owner is not expected to do.
//
//   - No allocation. Timers live in a slab with a free list and intrusive
//     index-linked bucket lists. Start, Stop and Advance allocate nothing
//     unless more timers are pending than ever before, when the slab grows
//     by append. The payload is plain data, not a closure.
//
//   - Reentrancy. The callback may Start and Stop any timers, including
//     re-arming. The firing timer's own Handle is already stale when the
//     callback runs. Stop returning true guarantees the timer never fires,
//     even when it was due in the same Advance. Advance must not be called
//     from the callback.
//
// Timers further out than one revolution (Slots*Tick) stay in their bucket
// and are skipped until their tick comes round, so Start and Stop stay O(1)
// and Advance costs one bucket scan (about pending/Slots entries) per tick.
package timer
