// Package bench holds sipedge's cross-package benchmarks: whole calls driven
// through the real parser, transaction layer, dialogs and B2BUA engine of
// one shard over an in-memory transport, with a fake clock. It has no
// non-test code; its calls are scripted in rig_test.go, on the engine rig
// (internal/enginerig) the call core's tests and the fuzz targets share.
//
//	go test -run '^$' -bench CallFlow -benchmem -count 5 ./bench/
//	go test -run '^$' -bench ConcurrentCalls -benchtime 1x -count 5 ./bench/
//
// BenchmarkCallFlow reports calls/s and allocs/op, where one op is one
// complete call (INVITE, 100, 180, 200, ACK, BYE, 200 on both legs);
// BenchmarkConcurrentCalls reports the heap bytes one confirmed call holds.
//
// The baseline that compares sipedge's parser with sipgo lives in the
// bench/sipgo module, so that sipgo never becomes a dependency of sipedge.
package bench
