// Package enginerig runs one call core engine (a dialog/b2bua.Engine) the
// way a shard does, over an in-memory network with a fake clock, for the
// call core's tests, its golden call-flow scripts, the benchmarks of bench/
// and the fuzz targets of fuzz/.
//
// What a peer sends is real wire bytes: it goes through the parser's Parse
// and Validate, as on a shard, before Engine.Receive (Rig.Deliver). What the
// engine sends is copied onto the Wire, in order, where each Peer reads and
// parses what was sent to its address. The Clock is the shard's timer wheel:
// timers fire in order of their deadlines as it advances, each at its own
// time. A warm rig allocates nothing of its own, so what allocates in a run
// is the code under test.
//
// The package does not import dialog/b2bua, so that the call core's own
// tests can use it: a test builds the engine's Env from the rig's parts
// (Wire.Send, &Clock, MintCallID, a Carriers, a CDRFunc), which satisfy
// b2bua's interfaces by their methods, then Attaches the engine to the
// rig. Everything runs on the test's goroutine.
//
// Only tests import this package (deps_test.go checks it).
package enginerig
