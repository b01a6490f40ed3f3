package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// Every error the package returns starts with "timerq: " and carries it
// once, however deeply it is wrapped (no "timerq: get: timerq: …").
func TestErrorsCarryOnePrefix(t *testing.T) {
	ctx := context.Background()
	_, rdb := redistest.Mini(t)
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t), MaxPayloadBytes: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.ScheduleIn(ctx, "fired", 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Claim(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// A key of the wrong type makes the scripts' Redis errors wrap a sentinel.
	if err := rdb.Set(ctx, q.Keys()[1], "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	ok := time.Now().Add(time.Hour)
	cases := []struct {
		name string
		err  error
		want error
		text string // a prefix of the whole message, when pinned
	}{
		{"options", func() error { _, err := queue.New(rdb, queue.Options{StreamMaxLen: -2}); return err }(),
			queue.ErrInvalidOptions, "timerq: invalid options: StreamMaxLen -2 is negative"},
		{"batch item", func() error {
			_, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "a", Due: ok}, {ID: "b", Due: ok, Payload: []byte("too long")}})
			return err
		}(), queue.ErrPayloadTooLarge, `timerq: batch item 1: payload too large: timer "b" has 8 bytes`},
		{"batch item, both due and in", func() error {
			_, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "a", Due: ok, In: time.Second}})
			return err
		}(), queue.ErrInvalidDue, `timerq: batch item 0: invalid due time: timer "a" has both Due and In`},
		{"get over a wrong type", func() error { _, err := q.Get(ctx, "x"); return err }(),
			queue.ErrWrongType, `timerq: get "x": a namespace key holds the wrong type: WRONGTYPE`},
		{"schedule over a wrong type", func() error { _, err := q.ScheduleIn(ctx, "x", time.Minute, nil); return err }(),
			queue.ErrWrongType, `timerq: schedule: a namespace key holds the wrong type: WRONGTYPE`},
		{"cancel over a wrong type", func() error { _, err := q.Cancel(ctx, "x"); return err }(),
			queue.ErrWrongType, `timerq: cancel "x": a namespace key holds the wrong type`},
		{"invalid ID", func() error { _, err := q.Get(ctx, ""); return err }(), queue.ErrInvalidID, "timerq: invalid timer ID: the ID is empty"},
		{"claim limit", func() error { _, err := q.Claim(ctx, 0); return err }(), queue.ErrInvalidOptions, "timerq: invalid options: claim limit 0"},
		{"wait ended", func() error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return q.Wait(c, "y")
		}(), context.Canceled, `timerq: wait "y": context canceled`},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		msg := c.err.Error()
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v does not wrap %v", c.name, c.err, c.want)
		}
		if !strings.HasPrefix(msg, "timerq: ") || strings.Count(msg, "timerq: ") != 1 {
			t.Errorf("%s: %q does not carry the prefix exactly once", c.name, msg)
		}
		if c.text != "" && !strings.HasPrefix(msg, c.text) {
			t.Errorf("%s:\n got %s\nwant %s…", c.name, msg, c.text)
		}
	}
}

// A claim that would fire a timer refuses a foreign type in any key it
// writes, naming the key, before its first write, whether the fire stream
// is trimmed (its probe checks the type) or not (a TYPE does). A claim that
// finds nothing due reads only the due set, and checks nothing else.
func TestClaimRefusesForeignTypes(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		for _, maxlen := range []int64{0, queue.Unbounded} {
			// The keys claim writes, by their index in Keys: timers,
			// fired, expire, fires, counters.
			for _, k := range []int{1, 2, 4, 5, 6} {
				q := newQueue(t, b, queue.Options{StreamMaxLen: maxlen})
				if _, err := q.Schedule(ctx, "due", time.Now().Add(-time.Second), nil); err != nil {
					t.Fatal(err)
				}
				key := q.Keys()[k]
				if err := b.Client.Del(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
				if err := b.Client.Set(ctx, key, "foreign", 0).Err(); err != nil {
					t.Fatal(err)
				}
				_, err := q.Claim(ctx, 10)
				if !errors.Is(err, queue.ErrWrongType) || !strings.Contains(err.Error(), key) {
					t.Fatalf("StreamMaxLen %d: claim over a foreign %s = %v, want ErrWrongType naming it", maxlen, key, err)
				}
				if n, err := b.Client.ZCard(ctx, q.Keys()[0]).Result(); err != nil || n != 1 {
					t.Fatalf("StreamMaxLen %d: the claim refused over %s left %d due timers (%v), want 1 untouched", maxlen, key, n, err)
				}
			}
		}
		q := newQueue(t, b, queue.Options{})
		if err := b.Client.Set(ctx, q.Keys()[2], "foreign", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Claim(ctx, 10); err != nil || len(res.Fired) != 0 {
			t.Fatalf("an empty claim beside a foreign fired set = %v, %v; want nothing fired, no error", res, err)
		}
	})
}

// A claim reports the server's clock twice: Now to the millisecond (every
// timer it fired has FiredAt = Now) and Clock to the microsecond, which a
// poller sleeps by.
func TestClaimClockHasMicroseconds(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		at := time.Date(2030, 1, 2, 3, 4, 5, 678_901_000, time.UTC)
		if b.Mini != nil {
			b.Mini.SetTime(at)
		}
		if _, err := q.Schedule(ctx, "due", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), nil); err != nil {
			t.Fatal(err)
		}
		res, err := q.Claim(ctx, 10)
		if err != nil || len(res.Fired) != 1 {
			t.Fatalf("claim = %+v, %v; want one timer fired", res, err)
		}
		if !res.Clock.Truncate(time.Millisecond).Equal(res.Now) || !res.Fired[0].FiredAt.Equal(res.Now) {
			t.Fatalf("Clock %v, Now %v, FiredAt %v: want Now = FiredAt = Clock to the millisecond", res.Clock, res.Now, res.Fired[0].FiredAt)
		}
		if b.Mini != nil && !res.Clock.Equal(at) {
			t.Fatalf("Clock = %v, want the server's %v to the microsecond", res.Clock, at)
		}
	})
}
