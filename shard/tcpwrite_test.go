package shard

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
)

// The replies to a batch of requests read in one go are written to the
// connection together when the loop is done with the read (flushTCP):
// all of them, whole and in order, and nothing stays queued.
func TestTCPRepliesOfABatchInOrder(t *testing.T) {
	testtier.RequiresSockets(t)
	const n = 50
	s, _, port := startServer(t, 1, Config{})
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(optionsBatch(n)); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	for i := range n {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		var head strings.Builder
		cl := -1
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reply %d: %v after %q", i, err, head.String())
			}
			head.WriteString(line)
			if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
				fmt.Sscan(strings.TrimSpace(v), &cl)
			}
			if line == "\r\n" {
				break
			}
		}
		if _, err := io.CopyN(io.Discard, rd, int64(cl)); err != nil || cl < 0 {
			t.Fatalf("reply %d: body of %d bytes: %v", i, cl, err)
		}
		if want := fmt.Sprintf("Call-ID: batch-%d@test\r\n", i); !strings.HasPrefix(head.String(), "SIP/2.0 200 OK") || !strings.Contains(head.String(), want) {
			t.Fatalf("reply %d, want the 200 to %q:\n%s", i, want, head.String())
		}
	}
	sh := s.Shards()[0]
	onShard(sh, func() {
		if len(sh.tcpOut) != 0 {
			t.Errorf("%d connections left with bytes queued", len(sh.tcpOut))
		}
		for _, tc := range sh.conns {
			if len(tc.out) != 0 {
				t.Errorf("a connection kept %d bytes queued", len(tc.out))
			}
		}
	})
}
