package dispatch_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// Timers that name a stored endpoint (queue.Endpoints.Put) are delivered to
// it, signed with its secret, through RouteByEndpoint and StoredEndpoints;
// a fire whose endpoint was deleted after it was scheduled is
// dead-lettered, and a timer that names none is not delivered.
func TestDeliversToStoredEndpoints(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b)
		var mu sync.Mutex
		secret := queue.Secret(queue.SecretPrefix + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32))))
		key, err := deliver.ParseSecret(secret.Reveal())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{} // body -> signed with the stored secret
		sink := newSink(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			sec, _ := strconv.ParseInt(r.Header.Get(deliver.HeaderTimestamp), 10, 64)
			want := deliver.Sign(r.Header.Get(deliver.HeaderID), time.Unix(sec, 0), body, key)
			mu.Lock()
			got[string(body)] = want != "" && r.Header.Get(deliver.HeaderSignature) == want
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})
		allow := &queue.PutEndpointOptions{Allow: loopback}
		for _, name := range []string{"billing", "doomed"} {
			if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: name, URL: sink.URL, Secrets: []queue.Secret{secret},
				Retry: queue.RetryPolicy{MaxAttempts: 2, Base: time.Millisecond, Cap: time.Millisecond}}, allow); err != nil {
				t.Fatal(err)
			}
		}
		past := time.Now().Add(-time.Second)
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{
			{ID: "a", Due: past, Payload: []byte(`{"n":1}`), Endpoint: "billing"},
			{ID: "b", Due: past, Payload: []byte(`{"n":2}`), Endpoint: "billing"},
			{ID: "c", Due: past, Payload: []byte(`{"n":3}`), Endpoint: "doomed"},
			{ID: "plain", Due: past, Payload: []byte(`{"n":4}`)},
		}); err != nil {
			t.Fatal(err)
		}
		if err := q.Endpoints().Delete(ctx, "doomed"); err != nil {
			t.Fatal(err)
		}
		for fired := 0; fired < 4; {
			res, err := q.Engine().Claim(ctx, queue.MaxBatch)
			if err != nil || len(res.Fired) == 0 {
				t.Fatalf("claim: %+v, %v", res, err)
			}
			fired += len(res.Fired)
		}
		guard := &deliver.Guard{Allow: loopback}
		d := &dispatch.Dispatcher{Queue: q, Consumer: "d1", Sender: newSender(t, guard),
			Route: dispatch.RouteByEndpoint, Lookup: dispatch.StoredEndpoints(q, guard),
			OnError: func(err error) { t.Errorf("dispatcher: %v", err) }}
		startDispatcher(t, d)
		redistest.Eventually(t, 30*time.Second, "both billing fires delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= 2
		})
		redistest.Eventually(t, 30*time.Second, "the doomed fire dead-lettered", func() bool {
			page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 10})
			dl := page.DeadLetters
			return err == nil && len(dl) == 1 && dl[0].Event.ID == "c" && strings.Contains(dl[0].Error, "no such endpoint")
		})
		mu.Lock()
		defer mu.Unlock()
		for _, body := range []string{`{"n":1}`, `{"n":2}`} {
			if !got[body] {
				t.Errorf("request %s was not signed with the endpoint's stored secret", body)
			}
		}
		if _, ok := got[`{"n":4}`]; ok || len(got) != 2 {
			t.Errorf("requests %v: want exactly the two billing fires", got)
		}
	})
}
