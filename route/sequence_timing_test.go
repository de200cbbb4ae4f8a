package route

import (
	"testing"
	"time"
)

// BenchmarkSequenceFailover runs the engine's part of a failover call: the
// first carrier answers 503 after a 100, the second rings and answers.
func BenchmarkSequenceFailover(b *testing.B) {
	routes := []Route{{CarrierID: "a", GatewayGroup: "a", TimeoutSecs: 6}, {CarrierID: "b", GatewayGroup: "b"}}
	b.ReportAllocs()
	for b.Loop() {
		s := NewSequence(routes, SequenceOptions{RingTimeout: 45 * time.Second})
		s.Next(0)
		s.Progress(time.Millisecond, 100)
		s.Final(2*time.Millisecond, 503, "Service Unavailable")
		s.Progress(3*time.Millisecond, 180)
		if st := s.Final(4*time.Millisecond, 200, "OK"); st.Kind != StepAnswered {
			b.Fatal(st.Kind)
		}
	}
}
