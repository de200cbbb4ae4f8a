package b2bua

// callExt is what a call keeps of the SIP extensions it uses: reliable
// provisional responses (RFC 3262, rel.go) and, in uphold, the legs'
// session timers (RFC 4028, sessiontimer.go). Most calls use none and hold
// none (Call.ext is nil): a call takes one from the engine's pool as it
// first needs one (extOf) and gives it back as it ends (releaseExt), so a
// warm engine allocates none, and a plain call pays a nil check.
type callExt struct {
	rel     relState
	session [2]sessionLeg // by sessionSide
}

// extOf returns c's extension state, taking one from the pool if c has
// none yet.
func (e *Engine) extOf(c *Call) *callExt {
	if c.ext == nil {
		if n := len(e.pool.exts); n > 0 {
			c.ext = e.pool.exts[n-1]
			e.pool.exts = e.pool.exts[:n-1]
		} else {
			c.ext = new(callExt)
		}
	}
	return c.ext
}

// releaseExt stops what c's extension state has running and gives it back
// to the pool, with its buffers.
func (e *Engine) releaseExt(c *Call) {
	x := c.ext
	if x == nil {
		return
	}
	c.ext = nil
	e.stopRel(x)
	e.stopSessions(x)
	e.putBuf(x.rel.sent)
	e.putBuf(x.rel.pending)
	*x = callExt{}
	e.pool.exts = append(e.pool.exts, x)
}
