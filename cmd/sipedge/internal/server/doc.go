// Package server wires sipedge together from its configuration: the
// sharded runtime (shard), one B2BUA engine per shard (dialog/b2bua), the
// routing decision (route), the CDR writer (dialog/cdr) and the admin HTTP
// API. It is the only place that knows all of them; cmd/sipedge runs it.
package server
