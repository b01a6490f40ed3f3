package cliconf_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestOverlapRefusalNamesTheRight: an application user without the
// +hincrby of docs/security.md's app line is refused by Consume's overlap
// script before it writes anything, with an error naming +hincrby; the
// occurrences stay pending for a retry.
func TestOverlapRefusalNamesTheRight(t *testing.T) {
	line := slices.DeleteFunc(slices.Clone(aclLines(t)["app"]), func(w string) bool { return w == "+hincrby" })
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := redistest.Namespace(t)
	rdb, _ := createUser(t, srv, admin, line, ns)
	adminQ, err := queue.New(admin, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer adminQ.Close()
	if _, _, err := adminQ.Recurring().Put(ctx, queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip}); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Second)
	// Restored: Schedule refuses an occurrence's ID for a plain timer.
	if _, err := adminQ.Restore(ctx, []queue.Timer{{ID: "s@1", State: queue.StateScheduled, Due: past, CreatedAt: past},
		{ID: "s@2", State: queue.StateScheduled, Due: past, CreatedAt: past}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminQ.Engine().Claim(ctx, 10); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	cctx, stop := context.WithCancel(ctx)
	var first error
	handled := 0
	_ = q.Consume(cctx, "g", "c", func(context.Context, queue.Event) error { handled++; return nil }, queue.ConsumeOptions{
		Block: 20 * time.Millisecond,
		OnError: func(err error) {
			if first == nil {
				first = err
			}
			stop()
		},
	})
	stop()
	if !errors.Is(first, queue.ErrPermission) || !strings.Contains(first.Error(), "+hincrby") {
		t.Fatalf("Consume reported %v, want ErrPermission naming +hincrby", first)
	}
	if handled != 0 {
		t.Fatalf("%d occurrences handled although the overlap check was refused", handled)
	}
	if n, _ := admin.HLen(ctx, keyspace.Shard(ns, 0, 1).Overlap("g")).Result(); n != 0 {
		t.Fatalf("the refused script wrote %d fields", n)
	}
	if pend, err := admin.XPending(ctx, adminQ.Keys().Stream(0), "g").Result(); err != nil || pend.Count != 2 {
		t.Fatalf("XPENDING = %+v, %v; want both occurrences pending for a retry", pend, err)
	}
}
