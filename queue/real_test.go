package queue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func splitLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

// TestWaitSurvivesPubSubKill kills the waiters' pub/sub connection mid-wait:
// go-redis reconnects and resubscribes, and the wait still ends after the
// fire. Only a real server has CLIENT KILL.
func TestWaitSurvivesPubSubKill(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ctx := context.Background()
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t), RecheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Schedule(ctx, "k", time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	w := waitAsync(ctx, q, "k")
	redistest.Eventually(t, 5*time.Second, "the waiter's subscription", func() bool { return queue.WaitSubscribed(q, "k") })
	killed, err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	if err != nil || killed != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v", killed, err)
	}
	// Fire while the connection is down: this wakeup is lost.
	if _, err := q.FireNow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if fired := claimAll(t, q); len(fired) != 1 {
		t.Fatalf("fired %v", fired)
	}
	if err := mustReturn(t, w, 10*time.Second); err != nil {
		t.Fatalf("Wait = %v", err)
	}
}

// TestAcknowledgedTimersSurviveCrash schedules on an fsync-always server,
// kills it with SIGKILL and restarts it on the same data.
func TestAcknowledgedTimersSurviveCrash(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	rdb := srv.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var batch []queue.NewTimer
	for i := range n {
		// Half came due "while everything was down".
		due := time.Now().Add(time.Duration(i%2) * time.Hour).Add(-time.Duration(1-i%2) * time.Second)
		batch = append(batch, queue.NewTimer{ID: fmt.Sprint("d", i), Due: due, Payload: []byte("x")})
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	srv.Kill9()
	srv.Restart()

	page, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if page.Scheduled != n {
		t.Fatalf("%d timers after the crash, want %d", page.Scheduled, n)
	}
	for _, tm := range batch[:10] {
		got, err := q.Get(ctx, tm.ID)
		if err != nil || !got.Due.Equal(ceilMicros(tm.Due)) {
			t.Fatalf("Get(%s) = %+v, %v", tm.ID, got, err)
		}
	}
	// The first claim after the restart fires what came due meanwhile.
	if fired := claimAll(t, q); len(fired) != n/2 {
		t.Fatalf("first claim after restart fired %d, want %d", len(fired), n/2)
	}
}
