// Package dialog holds dialogs, the SIP transaction layer (dialog/txn), the
// B2BUA call logic (dialog/b2bua), Digest answers to carriers' challenges
// (dialog/digest) and CDRs (dialog/cdr). Everything here runs on the shard that owns the
// call; it performs no blocking I/O.
package dialog
