package redistest

import (
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
)

// TestStartCluster: the cluster's nodes share the slots (keys of different
// slots live on different nodes, a hash tag keeps keys together) and every
// node serves its own.
func TestStartCluster(t *testing.T) {
	testtier.RequiresSockets(t)
	start := time.Now()
	c := StartCluster(t, 3)
	t.Logf("cluster of %d up in %v: %s", len(c.Nodes), time.Since(start), c.URL())
	owners := map[*Server]bool{}
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		s := c.Owner(key)
		owners[s] = true
		s.MustDo("SET " + key + " 1")
	}
	if len(owners) < 2 {
		t.Fatalf("8 keys all on one node")
	}
	if a, b := c.Owner("{tag}a"), c.Owner("{tag}b"); a != b {
		t.Fatalf("{tag}a on %s, {tag}b on %s: want one node", a.Addr(), b.Addr())
	}
	total := 0
	for _, s := range c.Nodes {
		reply := s.MustDo("DBSIZE")
		if reply != ":0" {
			total++
		}
	}
	if total != len(owners) {
		t.Fatalf("%d nodes hold keys, want %d", total, len(owners))
	}
}
