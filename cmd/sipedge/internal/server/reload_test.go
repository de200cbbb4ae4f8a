package server

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

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
