package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestNamespaceCreatedByAnotherReplica: a replica that opened a namespace
// before another replica created it with shards sees the shards soon
// (within a second), and its creates land on them.
func TestNamespaceCreatedByAnotherReplica(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		a := newEnv(t, b, api.Options{})
		other, err := api.New(api.Options{Client: b.Client})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		otherSrv := httptest.NewServer(other)
		defer otherSrv.Close()
		ctx := context.Background()
		ns := a.ns + "-late"
		nsURL := a.srv.URL + "/v1/namespaces/" + ns
		shardsSeen := func() int {
			r := a.do(ctx, "GET", nsURL, nil)
			var n api.NamespaceJSON
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &n) != nil {
				t.Fatalf("get namespace = %d %s", r.Status, r.Body)
			}
			return n.Shards
		}
		if n := shardsSeen(); n != 1 {
			t.Fatalf("an uncreated namespace has %d shards", n)
		}
		res, err := otherSrv.Client().Do(func() *http.Request {
			req, _ := http.NewRequest("PUT", otherSrv.URL+"/v1/namespaces/"+ns, strings.NewReader(`{"shards": 4}`))
			return req
		}())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("create through the other replica = %d", res.StatusCode)
		}
		redistest.Eventually(t, 5*time.Second, "the first replica to see 4 shards", func() bool { return shardsSeen() == 4 })
		var batch []map[string]any
		for i := range 12 {
			batch = append(batch, map[string]any{"id": fmt.Sprint("t", i), "in": "1h"})
		}
		if r := a.do(ctx, "POST", nsURL+"/timers/batch", map[string]any{"timers": batch}); r.Status != http.StatusOK {
			t.Fatal(r.Status, string(r.Body))
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: ns, Shards: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		st, err := q.Stats(ctx)
		if err != nil || st.Scheduled != 12 {
			t.Fatalf("the 4-shard layout holds %d timers (%v), want 12", st.Scheduled, err)
		}
	})
}

// TestNamespacesInUseAreNotEvicted: with room for one open namespace, a
// wait held in one namespace survives requests to others, which evict
// only idle namespaces, and still answers the fire.
func TestNamespacesInUseAreNotEvicted(t *testing.T) {
	_, rdb := redistest.Mini(t)
	b := &redistest.Backend{Name: "mini", Client: rdb}
	e := newEnv(t, b, api.Options{MaxNamespaces: 1})
	ctx := context.Background()
	if r := e.do(ctx, "POST", e.url("/timers"), map[string]any{"id": "w", "in": "1h"}); r.Status != http.StatusCreated {
		t.Fatal(r.Status, string(r.Body))
	}
	got := make(chan resp, 1)
	go func() { got <- e.do(ctx, "GET", e.url("/timers/w/wait?timeout=50s"), nil) }()
	redistest.Eventually(t, 5*time.Second, "the wait's subscription", func() bool {
		n, err := rdb.PubSubNumSub(ctx, e.q.Keys().Timer("w")).Result()
		return err == nil && n[e.q.Keys().Timer("w")] > 0
	})
	for i := range 5 {
		u := fmt.Sprintf("%s/v1/namespaces/%s-%d/timers", e.srv.URL, e.ns, i)
		if r := e.do(ctx, "POST", u, map[string]any{"id": "x", "in": "1h"}); r.Status != http.StatusCreated {
			t.Fatalf("create in another namespace = %d %s", r.Status, r.Body)
		}
	}
	// A namespace opened while the cache is full is not evicted by its
	// own opening: its wait runs to its timeout.
	other := fmt.Sprintf("%s/v1/namespaces/%s-other/timers", e.srv.URL, e.ns)
	if r := e.do(ctx, "POST", other, map[string]any{"id": "y", "in": "1h"}); r.Status != http.StatusCreated {
		t.Fatal(r.Status, string(r.Body))
	}
	if r := e.do(ctx, "GET", other+"/y/wait?timeout=20ms", nil); r.Status != http.StatusOK || r.timer(t).State != "scheduled" {
		t.Fatalf("a wait in a namespace opened with the cache full = %d %s", r.Status, r.Body)
	}
	if r := e.do(ctx, "POST", e.url("/timers/w/fire"), nil); r.Status != http.StatusOK {
		t.Fatal(r.Status, string(r.Body))
	}
	redistest.AwaitServerTime(t, rdb, time.Now())
	e.claimAll()
	if r := <-got; r.Status != http.StatusOK || r.timer(t).State != "fired" {
		t.Fatalf("the held wait = %d %s", r.Status, r.Body)
	}
}
