package server

import (
	"testing"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/dialog/txn"
)

// TestTxnMemoryBudget: sip.max_txn_memory_mb reaches each shard's
// transaction table as txn.Config.MaxStoredBytes, 64 MiB by default.
func TestTxnMemoryBudget(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want int
	}{
		{"shards: 1\n", txn.DefaultMaxStoredBytes},
		{"shards: 1\nsip: { max_txn_memory_mb: 16 }\n", 16 << 20},
	} {
		cfg, err := config.Parse([]byte(tt.yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{cfg: cfg}
		if got := s.b2buaConfig(0).Txn.MaxStoredBytes; got != tt.want {
			t.Errorf("%q: MaxStoredBytes %d, want %d", tt.yaml, got, tt.want)
		}
	}
}
