package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// waitAsync starts Wait in a goroutine and returns its result channel.
func waitAsync(ctx context.Context, q *queue.Queue, id string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- q.Wait(ctx, id) }()
	return ch
}

func mustNotReturn(t *testing.T, ch <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("Wait returned early: %v", err)
	case <-time.After(d):
	}
}

func mustReturn(t *testing.T, ch <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(within):
		t.Fatalf("Wait did not return within %v", within)
		return nil
	}
}

func TestWaitWakesOnFire(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		// A recheck far away proves the pub/sub wakeup, not the safety net, ends the wait.
		q := newQueue(t, b, queue.Options{RecheckInterval: time.Hour})
		if _, err := q.Schedule(ctx, "w", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		var waits []<-chan error
		for range 3 {
			waits = append(waits, waitAsync(ctx, q, "w"))
		}
		for _, w := range waits {
			mustNotReturn(t, w, 0)
		}
		redistest.Eventually(t, 5*time.Second, "the waiters' subscription", func() bool { return queue.WaitSubscribed(q, "w") })
		if _, err := q.FireNow(ctx, "w"); err != nil {
			t.Fatal(err)
		}
		if fired := claimAll(t, q); len(fired) != 1 {
			t.Fatalf("fired %v", fired)
		}
		for _, w := range waits {
			if err := mustReturn(t, w, 2*time.Second); err != nil {
				t.Fatalf("Wait = %v", err)
			}
		}
	})
}

func TestWaitOutcomes(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{RecheckInterval: time.Hour})
		if _, err := q.Schedule(ctx, "done", time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
		claimAll(t, q)
		if err := mustReturn(t, waitAsync(ctx, q, "done"), time.Second); err != nil {
			t.Fatalf("Wait on a fired timer = %v", err)
		}
		if err := mustReturn(t, waitAsync(ctx, q, "ghost"), time.Second); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Wait on an unknown timer = %v", err)
		}

		if _, err := q.Schedule(ctx, "c", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		w := waitAsync(ctx, q, "c")
		redistest.Eventually(t, 5*time.Second, "the waiter's subscription", func() bool { return queue.WaitSubscribed(q, "c") })
		if _, err := q.Cancel(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if err := mustReturn(t, w, 2*time.Second); !errors.Is(err, queue.ErrCancelled) {
			t.Fatalf("Wait on a timer cancelled meanwhile = %v", err)
		}
		if err := mustReturn(t, waitAsync(ctx, q, "c"), time.Second); !errors.Is(err, queue.ErrCancelled) {
			t.Fatalf("Wait on a cancelled timer = %v", err)
		}

		if _, err := q.Schedule(ctx, "later", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := q.Wait(tctx, "later"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait past its deadline = %v", err)
		}
	})
}

func TestWaitRecheckCatchesLostWakeup(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{RecheckInterval: 100 * time.Millisecond})
		if _, err := q.Schedule(ctx, "quiet", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		w := waitAsync(ctx, q, "quiet")
		// Subscribed and its first state reads queued: only the recheck
		// reads it again.
		redistest.Eventually(t, 5*time.Second, "the waiter to settle", func() bool { return queue.WaitSettled(q, "quiet") })
		// Mark it fired without a wakeup, as if the message were lost.
		if err := b.Client.Eval(ctx, `
			redis.call('ZREM', KEYS[1], ARGV[1])
			local rec = redis.call('HGET', KEYS[2], ARGV[1])
			redis.call('HSET', KEYS[2], ARGV[1], 'f' .. string.sub(rec, 2))
			return 1`, shardKeys(t, q, "quiet")[:2], "quiet").Err(); err != nil {
			t.Fatal(err)
		}
		if err := mustReturn(t, w, 2*time.Second); err != nil {
			t.Fatalf("Wait = %v", err)
		}
	})
}

// TestManyWaitersShareOneConnection counts the pub/sub connections in
// CLIENT LIST, which lists every client of the server: it needs a server
// of its own.
func TestManyWaitersShareOneConnection(t *testing.T) {
	redistest.ForEachAllPrivate(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		q := newQueue(t, b, queue.Options{})
		const n = 500
		var batch []queue.NewTimer
		for i := range n {
			// Due already: nothing fires them before the claims below.
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("m", i), Due: time.Now()})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, tm := range batch {
			wg.Go(func() { errs <- q.Wait(ctx, tm.ID) })
		}
		redistest.Eventually(t, 10*time.Second, "every waiter's subscription", func() bool {
			for _, tm := range batch {
				if !queue.WaitSubscribed(q, tm.ID) {
					return false
				}
			}
			return true
		})
		if b.Real != nil {
			clients, err := b.Client.ClientList(ctx).Result()
			if err != nil {
				t.Error(err)
			}
			if got := countSubscribers(clients); got != 1 {
				t.Errorf("%d pub/sub connections for %d waiters", got, n)
			}
		}
		if fired := claimAll(t, q); len(fired) != n {
			t.Fatalf("claimed %d timers, want %d", len(fired), n)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// countSubscribers counts CLIENT LIST lines of connections subscribed to a
// classic (sub=) or shard (ssub=, Redis 7.0+) channel.
func countSubscribers(clientList string) int {
	n := 0
	for _, line := range splitLines(clientList) {
		for _, f := range strings.Fields(line) {
			if (strings.HasPrefix(f, "sub=") || strings.HasPrefix(f, "ssub=")) && !strings.HasSuffix(f, "=0") {
				n++
				break
			}
		}
	}
	return n
}

func TestCloseEndsWaits(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, err := q.Schedule(ctx, "z", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		w := waitAsync(ctx, q, "z")
		redistest.Eventually(t, 5*time.Second, "the waiter's subscription", func() bool { return queue.WaitSubscribed(q, "z") })
		q.Close()
		if err := mustReturn(t, w, time.Second); !errors.Is(err, queue.ErrClosed) {
			t.Fatalf("Wait after Close = %v", err)
		}
		if err := q.Wait(ctx, "z"); !errors.Is(err, queue.ErrClosed) {
			t.Fatalf("new Wait after Close = %v", err)
		}
	})
}
