package redisurl

import (
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// DialTimeout is the connection timeout of a URL that sets none
// (dial_timeout=).
const DialTimeout = time.Second

// Options returns the client options of rawURL, as rueidis.ParseURL reads
// it (a Cluster's seed nodes as ?addr=host:port&addr=..., a database as
// /N or ?db=N), with client-side caching off, since every user of the
// shared Redis reads what another node may have just written, and
// DialTimeout unless the URL sets its own. Its error is rueidis's, which
// never shows the URL's password.
func Options(rawURL string) (rueidis.ClientOption, error) {
	opt, err := rueidis.ParseURL(rawURL)
	if err != nil {
		return rueidis.ClientOption{}, err
	}
	opt.DisableCache = true
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = DialTimeout
	}
	return opt, nil
}

// DBRefused explains err, a failed rueidis.NewClient(opt), when what Redis
// refused is the URL's database: a Redis Cluster has only database 0, and a
// server has a fixed number of them. It returns nil for any other failure
// (Redis down, loading, a bad password), which the caller rides out as it
// rides out an unreachable Redis. It tells by connecting again, to
// database 0, so it blocks for up to the dial timeout.
func DBRefused(opt rueidis.ClientOption, err error) error {
	db := opt.SelectDB
	if _, ok := rueidis.IsRedisErr(err); !ok || db == 0 {
		return nil
	}
	opt.SelectDB = 0
	c, err0 := rueidis.NewClient(opt)
	if err0 != nil {
		return nil
	}
	defer c.Close()
	if c.Mode() == rueidis.ClientModeCluster {
		return fmt.Errorf("database %d: %s is a Redis Cluster, which has only database 0",
			db, strings.Join(opt.InitAddress, ","))
	}
	return fmt.Errorf("database %d: Redis at %s refuses it: %w", db, strings.Join(opt.InitAddress, ","), err)
}
