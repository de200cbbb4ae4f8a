package quality_test

import (
	"fmt"
	"time"

	"github.com/sipedge/sipedge/quality"
	"github.com/sipedge/sipedge/route"
)

// The calls the failover engine and the carrier plane make, on a fake
// clock: a carrier that answers nothing is demoted once the evidence is in.
func Example() {
	m, err := quality.New(quality.Config{Mode: quality.ModeDemote, Prefixes: []string{"", "+44"}},
		quality.Options{Shards: 1}) // Options.Clock would start the reader
	if err != nil {
		panic(err)
	}
	defer m.Close()

	// On the shard: one prefix per call, an Outcome per attempt.
	c := m.Collector(0)
	p := m.Prefix("+447700900123")
	for i := range 30 {
		now := time.Duration(i) * 100 * time.Millisecond
		c.Record(now, p, &quality.Outcome{Carrier: "cheap", Gateway: "sip:gw1@192.0.2.10", Status: 480, Dialed: true, PDD: time.Second})
	}
	c.Tick(5 * time.Second) // the shard's timer, at least once a sampling interval

	// The reader, off the shards.
	m.Update(5 * time.Second)

	// On the shard, with the next call's decision and the call's buffer.
	routes := []route.Route{{CarrierID: "cheap"}, {CarrierID: "good"}}
	buf := make([]route.Route, 0, 8)
	for _, r := range m.Reorder(buf, routes, p) {
		fmt.Println(r.CarrierID, m.Score(p, r.CarrierID), m.Disabled(p, r.CarrierID))
	}
	// Output:
	// good 0 false
	// cheap 10 false
}
