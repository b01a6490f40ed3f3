package cliconf_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// The delivery role's documented line runs a dispatcher: it leases fires,
// reads the endpoint, retries a 500 and acknowledges the 204 that
// follows, writing the attempt log, which the application and operator
// roles may read; in another namespace it can do nothing.
func TestACLDeliverRole(t *testing.T) {
	lines := aclLines(t)
	if lines["deliver"] == nil {
		t.Fatal("docs/security.md lacks the ACL line of timerq-deliver-NS")
	}
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mine := redistest.Namespace(t)
	adminQ, err := queue.New(admin, queue.Options{Namespace: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer adminQ.Close()
	var hits atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	if _, err := adminQ.Endpoints().Put(ctx, queue.Endpoint{Name: "hook", URL: sink.URL, Secrets: []queue.Secret{queue.Secret(deliver.GenerateSecret())},
		Retry: queue.RetryPolicy{Base: time.Millisecond, Cap: 10 * time.Millisecond}}, &queue.PutEndpointOptions{Allow: loopback}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminQ.ScheduleBatch(ctx, []queue.NewTimer{{ID: "t", Due: time.Now().Add(-time.Second), Endpoint: "hook"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := adminQ.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
		t.Fatalf("claim: %+v %v", res, err)
	}

	rdb, _ := createUser(t, srv, admin, lines["deliver"], mine)
	q, err := queue.New(rdb, queue.Options{Namespace: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	sender := &deliver.Sender{Guard: &deliver.Guard{Allow: loopback}}
	defer sender.CloseIdleConnections()
	var errs atomic.Int64
	d := &dispatch.Dispatcher{Queue: q, Consumer: "d", Sender: sender, OnError: func(err error) {
		errs.Add(1)
		t.Errorf("dispatcher: %v", err)
	}}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	redistest.Eventually(t, 20*time.Second, "the fire is delivered and logged", func() bool {
		log, err := adminQ.Deliveries().Attempts(ctx, "t")
		return err == nil && len(log) == 2 && log[1].Outcome == "delivered"
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The application and the operator read the attempt log (the API's
	// and timerctl's get).
	for _, role := range []string{"app", "ops"} {
		c, _ := createUser(t, srv, admin, lines[role], mine)
		rq, err := queue.New(c, queue.Options{Namespace: mine})
		if err != nil {
			t.Fatal(err)
		}
		if log, err := rq.Deliveries().Attempts(ctx, "t"); err != nil || len(log) != 2 {
			t.Errorf("%s reads the attempt log: %v %v", role, log, err)
		}
		rq.Close()
	}
	// Another namespace is out of reach.
	other, err := queue.New(rdb, queue.Options{Namespace: "theirs"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.Lease(ctx, dispatch.DefaultGroup, "d", queue.LeaseOptions{})
	refused(t, "lease in another namespace", err)
	_, err = other.Endpoints().Get(ctx, "hook")
	refused(t, "read another namespace's endpoint", err)
}
