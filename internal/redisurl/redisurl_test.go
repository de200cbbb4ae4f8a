package redisurl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sipedge/sipedge/internal/testtier"
	"github.com/sipedge/sipedge/ratelimit/redistest"
)

func TestOptions(t *testing.T) {
	f := func(url string, addrs []string, db int, dial time.Duration) {
		t.Helper()
		opt, err := Options(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if strings.Join(opt.InitAddress, ",") != strings.Join(addrs, ",") || opt.SelectDB != db || opt.Dialer.Timeout != dial || !opt.DisableCache {
			t.Fatalf("%s: addresses %v, db %d, dial timeout %v, cache off %v; want %v, %d, %v, true",
				url, opt.InitAddress, opt.SelectDB, opt.Dialer.Timeout, opt.DisableCache, addrs, db, dial)
		}
	}
	f("redis://127.0.0.1:6379", []string{"127.0.0.1:6379"}, 0, DialTimeout)
	f("redis://127.0.0.1:6379/3", []string{"127.0.0.1:6379"}, 3, DialTimeout)
	f("rediss://u:p@h:7000?db=2&dial_timeout=250ms", []string{"h:7000"}, 2, 250*time.Millisecond)
	f("redis://a:7000?addr=b:7000&addr=c:7000", []string{"a:7000", "b:7000", "c:7000"}, 0, DialTimeout)

	for _, url := range []string{"http://h:6379", "redis://h:6379/x", "redis://h:6379?dial_timeout=soon"} {
		if _, err := Options(url); err == nil {
			t.Errorf("%s: no error", url)
		}
	}
}

// TestDBRefusedOtherFailures: a failure that is not a Redis error, or any
// failure with database 0, is not the database's: DBRefused says nothing
// and, since there is nothing to tell apart, connects nowhere.
func TestDBRefusedOtherFailures(t *testing.T) {
	opt, err := Options("redis://127.0.0.1:1/5")
	if err != nil {
		t.Fatal(err)
	}
	if err := DBRefused(opt, errors.New("dial tcp 127.0.0.1:1: connection refused")); err != nil {
		t.Errorf("a dial failure: %v, want nil", err)
	}
	opt.SelectDB = 0
	if err := DBRefused(opt, &rueidis.RedisError{}); err != nil {
		t.Errorf("database 0: %v, want nil", err)
	}
}

// TestDBRefused: against a real server, a database beyond its count is
// refused, and said so; against a Redis Cluster, any database but 0 is.
func TestDBRefused(t *testing.T) {
	testtier.RequiresSockets(t)
	refused := func(url string) error {
		t.Helper()
		opt, err := Options(url)
		if err != nil {
			t.Fatal(err)
		}
		c, err := rueidis.NewClient(opt)
		if err == nil {
			c.Close()
			return nil
		}
		return DBRefused(opt, err)
	}

	srv := redistest.Start(t)
	if err := refused(srv.URL() + "/1"); err != nil {
		t.Errorf("database 1 of a server: %v, want accepted", err)
	}
	if err := refused(srv.URL() + "/99"); err == nil || !strings.HasPrefix(err.Error(), "database 99: Redis at "+srv.Addr()+" refuses it: ") {
		t.Errorf("database 99 of a server: %v, want it refused", err)
	}

	c := redistest.StartCluster(t, 3)
	if err := refused("redis://" + c.Nodes[0].Addr() + "/1"); err == nil || err.Error() != "database 1: "+c.Nodes[0].Addr()+" is a Redis Cluster, which has only database 0" {
		t.Errorf("database 1 of a Cluster: %v, want it refused", err)
	}
}
