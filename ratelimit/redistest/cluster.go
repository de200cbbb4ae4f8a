package redistest

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of masters without replicas, owned by one
// test. Each node is a Server: a test may freeze, stop or ask one
// directly (Do on a node answers MOVED for a key of another node's slot).
type Cluster struct {
	tb    testing.TB
	Nodes []*Server
}

// clusterNodeTimeout is the nodes' cluster-node-timeout: long, so that a
// node slowed down by a loaded machine is not declared failed (with no
// replica to take over, its slots would stop the cluster).
const clusterNodeTimeout = "10000"

// StartCluster starts n (at least 3) redis-servers in cluster mode, on free
// ports and without persistence, and makes them one cluster, as
// redis-cli --cluster create does (the 16384 slots split evenly, no
// replicas) but without its one-second sleeps: each node its share of the
// slots and its own config epoch, then every node meets every other. It
// waits until every node reports cluster_state:ok and knows all the
// others. They are killed in tb.Cleanup. It skips tb, loudly, when
// redis-server is not installed.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	SkipIfMissing(tb)
	if n < 3 {
		tb.Fatalf("redistest: a Redis Cluster needs at least 3 masters, not %d", n)
	}
	c := &Cluster{tb: tb}
	for range n {
		dir := tb.TempDir()
		s := &Server{tb: tb, port: freeClusterPort(tb), dir: dir, args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", clusterNodeTimeout,
		}}
		s.start()
		tb.Cleanup(s.Stop)
		c.Nodes = append(c.Nodes, s)
	}
	for i, s := range c.Nodes {
		var addSlots strings.Builder
		addSlots.WriteString("CLUSTER ADDSLOTS")
		for slot := i * 16384 / n; slot < (i+1)*16384/n; slot++ {
			addSlots.WriteString(" " + strconv.Itoa(slot))
		}
		s.MustDo(addSlots.String())
		s.MustDo("CLUSTER SET-CONFIG-EPOCH " + strconv.Itoa(i+1))
	}
	for _, s := range c.Nodes {
		for _, other := range c.Nodes {
			if other != s {
				s.MustDo("CLUSTER MEET 127.0.0.1 " + strconv.Itoa(other.port))
			}
		}
	}
	// A master turns its state ok some 2 s after it started (Redis'
	// writable delay): the time the cluster takes to come up.
	c.waitOK()
	return c
}

// freeClusterPort is FreePort for a cluster node, whose cluster bus listens
// on port + 10000: both must be free, and the bus port below the ephemeral
// range (32768 on Linux) too.
func freeClusterPort(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		port := 20000 + rand.IntN(2700)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		ln.Close()
		if err == nil {
			bus.Close()
			return port
		}
	}
	tb.Fatal("no free port pair for a Redis Cluster node")
	return 0
}

// waitOK waits until every node reports cluster_state:ok, all the slots
// assigned and all the nodes known.
func (c *Cluster) waitOK() {
	c.tb.Helper()
	want := []string{"cluster_state:ok", "cluster_slots_assigned:16384",
		"cluster_known_nodes:" + strconv.Itoa(len(c.Nodes))}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range c.Nodes {
		for {
			info, err := s.bulk("CLUSTER INFO")
			if err == nil && hasLines(info, want) {
				break
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(filepath.Join(s.dir, "redis-server.log"))
				c.tb.Fatalf("Redis Cluster node %s not ready within 10 s (want %v): %v\n%s\nlog:\n%s", s.Addr(), want, err, info, log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func hasLines(text string, lines []string) bool {
	have := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for _, l := range lines {
		found := false
		for _, h := range have {
			found = found || h == l
		}
		if !found {
			return false
		}
	}
	return true
}

// URL is the cluster's redis:// URL: the first node, and the others as
// more seed nodes (addr=host:port), in the form rueidis.ParseURL reads.
func (c *Cluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr()
	for i, s := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + s.Addr()
	}
	return u
}

// Owner returns the node that serves key's slot. key must not contain
// spaces (it goes in an inline command).
func (c *Cluster) Owner(key string) *Server {
	c.tb.Helper()
	first := c.Nodes[0]
	reply, err := first.Do("EXISTS " + key)
	if err != nil {
		c.tb.Fatalf("redis EXISTS %s: %v", key, err)
	}
	moved, ok := strings.CutPrefix(reply, "-MOVED ")
	if !ok {
		if !strings.HasPrefix(reply, ":") {
			c.tb.Fatalf("redis EXISTS %s: %q", key, reply)
		}
		return first // the first node serves the slot
	}
	_, addr, _ := strings.Cut(moved, " ")
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	c.tb.Fatalf("key %s is on %s, which is not a node of the cluster", key, addr)
	return nil
}

// bulk sends one inline command on a fresh connection and returns its bulk
// string reply (e.g. CLUSTER INFO's).
func (s *Server) bulk(cmd string) (string, error) {
	c, br, err := s.send(cmd)
	if err != nil {
		return "", err
	}
	defer c.Close()
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return "", fmt.Errorf("%s: %q, want a bulk string", cmd, strings.TrimSpace(line))
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(br, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
