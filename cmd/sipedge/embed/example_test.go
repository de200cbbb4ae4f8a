package embed_test

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sipedge/sipedge/cmd/sipedge/embed"
	"github.com/sipedge/sipedge/dialog/b2bua"
	"github.com/sipedge/sipedge/route"
)

// A program running sipedge with its own policy: carriers over a rate
// ceiling dropped, a backup carrier when every carrier failed on 503.
// docs/embedding.md shows the same code.
func Example() {
	backup := []route.Route{{CarrierID: "backup", GatewayGroup: "backup-gw"}}
	policy := b2bua.Policy{
		OnInvite: func(r *route.Request, d *route.Decision) {
			var keep []route.Route // a new slice: d.Routes is shared
			for _, rt := range d.Routes {
				if rt.Rate <= 0.02 {
					keep = append(keep, rt)
				}
			}
			d.Routes = keep
		},
		OnFailure: func(c *b2bua.Call, code int, reason string) b2bua.FailureAction {
			if code == 500 || code == 503 {
				return b2bua.FailureAction{Routes: backup}
			}
			return b2bua.FailureAction{Code: 480, Reason: "Temporarily Unavailable"}
		},
	}
	cfg, err := embed.LoadConfig("sipedge.yaml")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := embed.Start(cfg, embed.Options{Policy: policy, Logger: slog.Default()})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	if err := srv.Shutdown(context.Background()); err != nil {
		log.Print(err)
	}
}
