// Package dialog holds dialogs, the SIP transaction layer (dialog/txn), the
// B2BUA call logic and CDRs. Everything here runs on the shard that owns the
// call; it performs no blocking I/O.
package dialog
