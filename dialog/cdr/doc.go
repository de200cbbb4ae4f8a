// Package cdr writes call detail records: one JSON object per line per call,
// to a file with size-based rotation, from a goroutine of its own.
//
// # Who calls what
//
// A Record is filled in by the shard that owns the call, usually taken from
// AcquireRecord. The shard passes it to Writer.Write, which only puts the
// pointer on a bounded queue and never blocks: when the queue is full the
// record is dropped, Write returns false, sipedge_cdr_dropped_total counts it
// and a separate goroutine logs the count (at most one line a second), so a
// slow disk slows CDRs, never calls.
//
// Write takes the Record over, whether it returns true or false: from then on
// the writer goroutine (or the pool) owns it and the caller must not read or
// write it, nor the Attempts it holds. CDRFields is only read and never kept
// by the writer, so the map may be shared (with a cached routing decision,
// say) provided nobody writes to it any more. Strings are immutable and safe
// to share, but for those Record.String made, which live in the record's
// own storage and go back to the pool with it.
//
// The writer goroutine takes the queued records every 100 ms, sooner when
// the queue is a quarter full: it is not woken per record, which would cost
// the shard a goroutine switch per call. It encodes each record
// (Record.AppendJSON), returns it to the pool, and appends the line to a
// buffered file. The buffer is flushed at least every 100 ms, before a
// rotation, on Reopen and on Close, so a crash loses at most that much plus
// the queue. Encoding never happens on the caller's goroutine.
//
// Write, Reopen and Close are safe for concurrent use from any goroutine.
// Reopen (SIGHUP after logrotate moved the file) and Close (graceful stop:
// every queued record is written, the file flushed and closed) are carried
// out by the writer goroutine and wait for it. Write after Close returns false.
//
// # Accounting
//
// After Close, every record passed to Write is in exactly one of
// sipedge_cdr_written_total (flushed to the file), sipedge_cdr_dropped_total
// (refused by Write) and sipedge_cdr_write_errors_total (lost to an I/O
// error, which is logged at most once a second). After an I/O error the file
// is reopened for the next record. A line an error cut short (a full disk
// takes what fits) stays in the file, counted as lost; whenever the file is
// opened and does not end in a newline, one is written first, so that such a
// line (or one a crash cut) spoils only itself, not the next record.
//
// # Rotation
//
// Before a line that would take the file past Options.MaxSize, the file is
// closed, Path.<MaxBackups> deleted, Path.<i> renamed to Path.<i+1>, Path
// renamed to Path.1, and a new Path created. With a negative MaxSize the
// package never rotates and an external logrotate plus Reopen does.
//
// # Encoding
//
// The encoding is hand-written (append style, no reflection) and matches
// encoding/json's escaping without HTML escaping; times are UTC RFC 3339 with
// milliseconds. The field set is fixed: see Record and FieldNames.
package cdr

//go:generate go run mktables.go
