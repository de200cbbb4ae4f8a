package enginerig

import "github.com/sipedge/sipedge/dialog/cdr"

// CDRFunc makes a function a b2bua.CDRSink: it sees each record, which
// goes back to the pool when it returns.
type CDRFunc func(r *cdr.Record)

// Write implements b2bua.CDRSink.
func (f CDRFunc) Write(r *cdr.Record) bool {
	f(r)
	cdr.ReleaseRecord(r)
	return true
}
