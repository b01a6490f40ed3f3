package dispatch_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// A debounced timer that names a stored endpoint is delivered to it once,
// with the newest call's payload.
func TestDeliversDebouncedTimer(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b)
		var mu sync.Mutex
		var got []string
		sink := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, string(body))
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
		secret := queue.Secret(queue.SecretPrefix + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32))))
		if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: "billing", URL: sink.URL, Secrets: []queue.Secret{secret}},
			&queue.PutEndpointOptions{Allow: loopback}); err != nil {
			t.Fatal(err)
		}
		o := queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Payload: []byte(`{"v":1}`), Endpoint: "billing"}
		if _, err := q.Debounce(ctx, "cart-7", o); err != nil {
			t.Fatal(err)
		}
		o.Delay, o.Payload = time.Millisecond, []byte(`{"v":2}`)
		res, err := q.Debounce(ctx, "cart-7", o)
		if err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "the window to fire", func() bool {
			c, err := q.Engine().Claim(ctx, queue.MaxBatch)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range c.Fired {
				if f.ID != res.Timer.ID {
					t.Fatalf("claim fired %q, not the window %q", f.ID, res.Timer.ID)
				}
			}
			return len(c.Fired) == 1
		})
		guard := &deliver.Guard{Allow: loopback}
		d := &dispatch.Dispatcher{Queue: q, Consumer: "d1", Sender: newSender(t, guard),
			Route: dispatch.RouteByEndpoint, Lookup: dispatch.StoredEndpoints(q, guard),
			OnError: func(err error) { t.Errorf("dispatcher: %v", err) }}
		startDispatcher(t, d)
		redistest.Eventually(t, 30*time.Second, "the window's fire delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= 1
		})
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || got[0] != `{"v":2}` {
			t.Fatalf("requests %q, want one with the newest payload", got)
		}
	})
}
