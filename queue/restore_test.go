package queue_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// binaryPayload holds every byte value, the record separator ':' and
// invalid UTF-8 among them.
func binaryPayload() []byte {
	p := make([]byte, 0, 300)
	for i := range 256 {
		p = append(p, byte(i))
	}
	return append(p, ":\xff\x00::"...)
}

// settledSource builds a namespace with one timer of each state, plus an
// overdue scheduled one, and returns every timer as List sees it.
func settledSource(t *testing.T, b *redistest.Backend) (*queue.Queue, []queue.Timer) {
	t.Helper()
	ctx := context.Background()
	src := newQueue(t, b, queue.Options{})
	now := serverNow(t, b)
	for _, nt := range []queue.NewTimer{
		{ID: "fired", Due: now.Add(-time.Minute), Payload: binaryPayload()},
		{ID: "cancelled", Due: now.Add(time.Hour), Payload: []byte("c")},
		{ID: "scheduled", Due: now.Add(2 * time.Hour), Payload: binaryPayload()},
		{ID: "empty", Due: now.Add(3 * time.Hour)},
	} {
		if _, err := src.ScheduleBatch(ctx, []queue.NewTimer{nt}); err != nil {
			t.Fatal(err)
		}
	}
	if f := claimAll(t, src); len(f) != 1 || f[0].ID != "fired" {
		t.Fatalf("source claim fired %+v", f)
	}
	if _, err := src.Cancel(ctx, "cancelled"); err != nil {
		t.Fatal(err)
	}
	// Created later, and due in the past: restored, it must fire.
	if _, err := src.Schedule(ctx, "overdue", now.Add(-time.Second), []byte("o")); err != nil {
		t.Fatal(err)
	}
	page, err := src.List(ctx, queue.ListOptions{})
	if err != nil || len(page.Timers) != 5 {
		t.Fatalf("List = %+v, %v", page, err)
	}
	return src, page.Timers
}

func sameTimer(a, b queue.Timer) bool {
	return a.ID == b.ID && a.State == b.State && a.Due.Equal(b.Due) && bytes.Equal(a.Payload, b.Payload) &&
		a.CreatedAt.Equal(b.CreatedAt) && a.FiredAt.Equal(b.FiredAt) && a.CancelledAt.Equal(b.CancelledAt)
}

func TestRestoreKeepsEveryStateAndNeverRefires(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		_, timers := settledSource(t, b)
		dst := newQueue(t, b, queue.Options{Retention: time.Hour})

		res, err := dst.Restore(ctx, timers)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if !r.Created || !sameTimer(r.Timer, timers[i]) {
				t.Errorf("Restore result %d = %+v, want created %+v", i, r, timers[i])
			}
			got, err := dst.Get(ctx, timers[i].ID)
			if err != nil || !sameTimer(got, timers[i]) {
				t.Errorf("restored %s = %+v, %v; exported %+v", timers[i].ID, got, err, timers[i])
			}
		}

		// Each settled timer is purged its retention after it settled:
		// layout 1 keeps that time in the expire set; layout 2 keeps the
		// time it settled, in its band of the sched set, and purge adds
		// the retention.
		sp := spaceAt(t, b.Client, dst, 0)
		for _, tm := range timers {
			if sp.Layout() == 2 {
				at, err := b.Client.ZScore(ctx, sp.Sched(), tm.ID).Result()
				want := map[queue.State]float64{
					queue.StateFired:     bandOf('f') + float64(tm.FiredAt.UnixMilli()),
					queue.StateCancelled: bandOf('c') + float64(tm.CancelledAt.UnixMilli()),
				}[tm.State]
				if tm.State == queue.StateScheduled {
					want = float64(tm.Due.UnixMicro()) / 1000
				}
				if err != nil || at != want {
					t.Errorf("%s %s at %.3f in %s, %v; want %.3f", tm.State, tm.ID, at, sp.Sched(), err, want)
				}
				continue
			}
			at, err := b.Client.ZScore(ctx, sp.Expire(), tm.ID).Result()
			switch tm.State {
			case queue.StateFired:
				if err != nil || int64(at) != tm.FiredAt.Add(time.Hour).UnixMilli() {
					t.Errorf("%s purge at %v, %v; want fired + 1h", tm.ID, at, err)
				}
			case queue.StateCancelled:
				if err != nil || int64(at) != tm.CancelledAt.Add(time.Hour).UnixMilli() {
					t.Errorf("%s purge at %v, %v; want cancelled + 1h", tm.ID, at, err)
				}
			default:
				if !errors.Is(err, redis.Nil) {
					t.Errorf("scheduled %s has a purge entry %v", tm.ID, at)
				}
			}
		}
		// Only the overdue scheduled timer fires; the fired one never again.
		fired := claimAll(t, dst)
		if len(fired) != 1 || fired[0].ID != "overdue" {
			t.Fatalf("claim after restore fired %+v, want only overdue", fired)
		}
		entries, err := b.Client.XRange(ctx, dst.Keys().Stream(0), "-", "+").Result()
		if err != nil || len(entries) != 1 || entries[0].Values["id"] != "overdue" {
			t.Fatalf("fire stream after restore = %v, %v; want only overdue's entry", entries, err)
		}
		st, err := dst.Stats(ctx)
		if err != nil || st.Scheduled != 2 || st.Fired != 2 || st.Cancelled != 1 {
			t.Fatalf("Stats = %+v, %v", st, err)
		}

		// Settled timers stay settled: cancel and reschedule refuse them.
		if _, err := dst.Reschedule(ctx, "fired", time.Now()); !errors.Is(err, queue.ErrAlreadyFired) {
			t.Errorf("reschedule of a restored fired timer: %v", err)
		}
		if _, err := dst.Cancel(ctx, "fired"); !errors.Is(err, queue.ErrAlreadyFired) {
			t.Errorf("cancel of a restored fired timer: %v", err)
		}
	})
}

func TestRestoreIsIdempotentByID(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		_, timers := settledSource(t, b)
		dst := newQueue(t, b, queue.Options{})
		// An existing ID, in another state, must be left alone.
		if _, err := dst.Schedule(ctx, "fired", time.Now().Add(time.Hour), []byte("mine")); err != nil {
			t.Fatal(err)
		}
		before, _ := dst.Get(ctx, "fired")
		res, err := dst.Restore(ctx, append(timers, timers[0]))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			wantCreated := timers[i%len(timers)].ID != "fired" && i < len(timers)
			if r.Created != wantCreated {
				t.Errorf("result %d (%s): created %v, want %v", i, r.Timer.ID, r.Created, wantCreated)
			}
		}
		if got, _ := dst.Get(ctx, "fired"); !sameTimer(got, before) {
			t.Fatalf("restore changed an existing timer: %+v, was %+v", got, before)
		}
		// Once more: nothing is created and nothing changes.
		res, err = dst.Restore(ctx, timers)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Created {
				t.Errorf("second restore created %s", r.Timer.ID)
			}
		}
		if f := claimAll(t, dst); len(f) != 1 || f[0].ID != "overdue" {
			t.Fatalf("claims after two restores fired %+v", f)
		}
	})
}

func TestRestorePublishesOnlyForScheduledTimers(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		_, timers := settledSource(t, b)
		dst := newQueue(t, b, queue.Options{})
		var settled, scheduled []queue.Timer
		for _, tm := range timers {
			if tm.State == queue.StateScheduled {
				scheduled = append(scheduled, tm)
			} else {
				settled = append(settled, tm)
			}
		}
		chans := []string{dst.Keys().Wake(0)}
		for _, tm := range timers {
			chans = append(chans, dst.Keys().Timer(tm.ID))
		}
		ps := b.Client.Subscribe(ctx, chans...)
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		for range len(chans) - 1 {
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := dst.Restore(ctx, settled); err != nil {
			t.Fatal(err)
		}
		if _, err := dst.Restore(ctx, scheduled); err != nil {
			t.Fatal(err)
		}
		// The first message must be the wake for the scheduled timers: any
		// message for a settled timer would come before it.
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		msg, err := ps.ReceiveMessage(rctx)
		if err != nil {
			t.Fatal(err)
		}
		want := scheduled[0].Due
		for _, tm := range scheduled {
			if tm.Due.Before(want) {
				want = tm.Due
			}
		}
		if msg.Channel != dst.Keys().Wake(0) || msg.Payload != dueScoreText(want) {
			t.Fatalf("first message %s %q; want the wake with %s", msg.Channel, msg.Payload, dueScoreText(want))
		}
	})
}

func TestRestoreIsAllOrNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{MaxPayloadBytes: 10})
		now := time.Now().UTC()
		good := queue.Timer{ID: "good", State: queue.StateScheduled, Due: now, CreatedAt: now}
		cases := []struct {
			name string
			tm   queue.Timer
			want error
		}{
			{"bad ID", queue.Timer{ID: "", State: queue.StateScheduled, Due: now, CreatedAt: now}, queue.ErrInvalidID},
			{"no state", queue.Timer{ID: "a", Due: now, CreatedAt: now}, queue.ErrInvalidOptions},
			{"no due", queue.Timer{ID: "a", State: queue.StateScheduled, CreatedAt: now}, queue.ErrInvalidDue},
			{"no created", queue.Timer{ID: "a", State: queue.StateScheduled, Due: now}, queue.ErrInvalidDue},
			{"fired without time", queue.Timer{ID: "a", State: queue.StateFired, Due: now, CreatedAt: now}, queue.ErrInvalidDue},
			{"cancelled with fired time", queue.Timer{ID: "a", State: queue.StateCancelled, Due: now, CreatedAt: now, FiredAt: now, CancelledAt: now}, queue.ErrInvalidDue},
			{"scheduled with settled time", queue.Timer{ID: "a", State: queue.StateScheduled, Due: now, CreatedAt: now, CancelledAt: now}, queue.ErrInvalidDue},
			{"created after 9999", queue.Timer{ID: "a", State: queue.StateScheduled, Due: now, CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, queue.ErrInvalidDue},
			{"big payload", queue.Timer{ID: "a", State: queue.StateScheduled, Due: now, CreatedAt: now, Payload: make([]byte, 11)}, queue.ErrPayloadTooLarge},
		}
		for _, c := range cases {
			_, err := q.Restore(ctx, []queue.Timer{good, c.tm})
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "restore item 1") {
				t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			}
		}
		if _, err := q.Restore(ctx, make([]queue.Timer, queue.MaxBatch+1)); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Errorf("oversize batch: %v", err)
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Fatalf("bad input wrote keys %v", keys)
		}
		// A key of a foreign type fails the script before its first write.
		if err := b.Client.Set(ctx, q.Keys().Shard(0)[4], "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		settled := queue.Timer{ID: "s", State: queue.StateFired, Due: now, CreatedAt: now, FiredAt: now}
		if _, err := q.Restore(ctx, []queue.Timer{good, settled}); !errors.Is(err, queue.ErrWrongType) {
			t.Fatalf("restore over a wrong-type key: %v", err)
		}
		if keys := nsKeys(t, b, q); len(keys) != 1 {
			t.Fatalf("a refused restore wrote keys %v", keys)
		}
	})
}
