// Package metricdoc is the one table of sipedge's metric families: each
// family's name, type, labels and meaning. The admin API's /metrics writes
// it as the families' # HELP and # TYPE lines (Write: VictoriaMetrics/metrics
// writes none of its own), and docs/metrics.md is generated from it
// (Markdown; `go generate ./cmd/sipedge/internal/metricdoc`), so that the
// help an operator scrapes and the reference are the same text.
//
// A metric created anywhere in sipedge gets its row in Families in the same
// commit: the server's tests scrape /metrics and fail on a family without
// one, and this package's tests fail on a sipedge_ name in the source
// without one.
//
// Everything here is read-only after init and safe for concurrent use. Write
// allocates (it groups a scrape's lines by family); it runs per scrape, off
// the shards.
package metricdoc

//go:generate go run ./gen -o ../../../../docs/metrics.md
