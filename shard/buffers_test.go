package shard

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sipedge/sipedge/internal/testtier"
)

// The listening sockets get the buffers Config asks for, and a start warns
// when the kernel capped one at its sysctl.
func TestSocketBuffers(t *testing.T) {
	testtier.RequiresSockets(t)
	rmemMax := sysctlInt(t, "/proc/sys/net/core/rmem_max")
	f := func(recv int, warn bool) {
		t.Helper()
		var logs bytes.Buffer
		port := freePort(t)
		s, err := New(Config{Listen: listens(fmt.Sprintf("udp://127.0.0.1:%d", port)), Shards: 1, SocketRecvBuffer: recv},
			func(*Shard) Handler { return Handler{} }, slog.New(slog.NewTextHandler(&logs, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		got, err := unix.GetsockoptInt(s.udpFD[0], unix.SOL_SOCKET, unix.SO_RCVBUF)
		s.Shutdown(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := 2 * min(recv, rmemMax); got != want {
			t.Errorf("asked %d: SO_RCVBUF %d, want %d", recv, got, want)
		}
		if warned := strings.Contains(logs.String(), "net.core.rmem_max"); warned != warn {
			t.Errorf("asked %d with rmem_max %d: warned %v, want %v:\n%s", recv, rmemMax, warned, warn, logs.String())
		}
	}
	f(rmemMax/2, false)
	f(rmemMax+4096, true)
}

func sysctlInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
