// Package sipgobench holds the baseline benchmarks that parse sipedge's
// benchmark messages with github.com/emiago/sipgo. It is its own module so
// that sipgo never becomes a dependency of sipedge; `make bench` compares
// the two.
package sipgobench
