package server

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sipedge/sipedge/cmd/sipedge/internal/config"
	"github.com/sipedge/sipedge/internal/testtier"
)

// An admin API change waits while a reload holds the lock; reads do not.
func TestSerializedChangesWaitForReload(t *testing.T) {
	testtier.RequiresWallClock(t)
	var mu sync.Mutex
	h := serialized(&mu, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	mu.Lock() // a reload in progress
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/trunks", nil))
		close(done)
	}()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/trunks", nil))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("GET during a reload: %d", rec.Code)
	}
	select {
	case <-done:
		t.Fatal("a POST ran while a reload held the lock")
	case <-time.After(50 * time.Millisecond): // watching for what must not happen
	}
	mu.Unlock()
	<-done
}

// restartRequired names each b2bua key that changed but ring_timeout_secs,
// which the trunks carry (a reload applies it with them).
func TestRestartRequiredB2BUA(t *testing.T) {
	parse := func(yaml string) *config.Config {
		t.Helper()
		c, err := config.Parse([]byte(yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	running := parse("b2bua: { ring_timeout_secs: 30, drain_timeout_secs: 5 }\ntrunks: [{ name: t, sources: [\"::1\"] }]")
	file := parse("b2bua: { ring_timeout_secs: 45, drain_timeout_secs: 6 }\ntrunks: [{ name: t, sources: [\"::1\"] }]")
	if got, want := restartRequired(running, file), []string{"b2bua.drain_timeout_secs"}; !reflect.DeepEqual(got, want) {
		t.Errorf("restart_required %q, want %q", got, want)
	}
	if file.Trunks[0].RingTimeout != 45*time.Second {
		t.Errorf("the file's trunk carries ring bound %v, want b2bua's 45s", file.Trunks[0].RingTimeout)
	}
}
