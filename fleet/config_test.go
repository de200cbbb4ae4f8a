package fleet

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestConfigCheck(t *testing.T) {
	f := func(c Config, want ...string) {
		t.Helper()
		var got []string
		c.Check(func(field, problem string) { got = append(got, field+": "+problem) })
		if len(got) != len(want) {
			t.Fatalf("%+v: problems %q, want %d: %q", c, got, len(want), want)
		}
		for i := range want {
			if !strings.Contains(got[i], want[i]) {
				t.Fatalf("%+v: problem %q, want it to contain %q", c, got[i], want[i])
			}
		}
	}
	f(Config{})
	f(Config{Redis: "redis://127.0.0.1:6379", NodeID: "edge-1.fra_2", LeaseSecs: 3600, CallJournal: true})
	f(Config{Redis: "rediss://u:p@h:1/0?addr=h2:1"})
	f(Config{Redis: "127.0.0.1:6379"}, "redis: want a redis:// or rediss:// URL")
	f(Config{Redis: "http://h:1"}, "redis: want a redis://")
	f(Config{NodeID: "a:b"}, `node_id: "a:b": want 1 to 64 letters`)
	f(Config{NodeID: strings.Repeat("n", 65)}, "node_id:")
	f(Config{NodeID: "édge"}, "node_id:")
	f(Config{LeaseSecs: -1}, "lease_secs: -1: want 1 to 3600")
	f(Config{LeaseSecs: 3601}, "lease_secs: 3601")
	f(Config{CallJournal: true}, "call_journal: needs fleet.redis")
	f(Config{Redis: "x", NodeID: "a b", LeaseSecs: -5}, "redis:", "node_id:", "lease_secs:")
}

func TestNewDefaults(t *testing.T) {
	f, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	host, _ := os.Hostname()
	if !strings.HasPrefix(host, f.NodeID()) || f.NodeID() == "" {
		t.Fatalf("node id %q, want the host name %q", f.NodeID(), host)
	}
	if f.o.LeaseSecs != DefaultLeaseSecs || f.lease.Seconds() != DefaultLeaseSecs || f.o.Nodes != 1 {
		t.Fatalf("defaults: lease %d (%v), nodes %d", f.o.LeaseSecs, f.lease, f.o.Nodes)
	}
	if f.Up() {
		t.Fatal("Up without Redis")
	}
}

func TestNewRefuses(t *testing.T) {
	f := func(o Options, want error, text string) {
		t.Helper()
		_, err := New(o)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), text) {
			t.Fatalf("New(%+v): %v, want %v with %q", o.Config, err, want, text)
		}
	}
	f(Options{Config: Config{Redis: "127.0.0.1:1"}}, ErrRedisURL, "fleet.redis: want a redis://")
	f(Options{Config: Config{Redis: "redis://127.0.0.1:1"}}.withJournal(nil), ErrInvalid, "call_journal needs Options.OnLost")
	f(Options{Config: Config{NodeID: "x:y"}}, ErrInvalid, "fleet.node_id")
	f(Options{Nodes: -1}, ErrInvalid, "negative")
}

func (o Options) withJournal(onLost func([]LostCall)) Options {
	o.CallJournal = true
	o.OnLost = onLost
	return o
}

func TestHostNodeID(t *testing.T) {
	f := func(id string, ok bool) {
		t.Helper()
		if validNodeID(id) != ok {
			t.Fatalf("validNodeID(%q) = %v", id, !ok)
		}
	}
	f("a", true)
	f("edge-01.example.net", true)
	f("", false)
	f("a:1", false)
	f("a b", false)
	f("{tag}", false)
}
