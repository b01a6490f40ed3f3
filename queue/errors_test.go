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
	if _, err := q.Engine().Claim(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// A key of the wrong type makes the scripts' Redis errors wrap a sentinel.
	if err := rdb.Set(ctx, q.Keys().Shard(0)[1], "not a hash", 0).Err(); err != nil {
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
		{"claim limit", func() error { _, err := q.Engine().Claim(ctx, 0); return err }(), queue.ErrInvalidOptions, "timerq: invalid options: claim limit 0"},
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

// TestFieldErrorNamesTheItem: a timer of a batch refused for its ID is a
// FieldError naming the item and the field, for callers that name their
// own input's field (the HTTP API), while the message and the sentinel
// stay those of the refusal.
func TestFieldErrorNamesTheItem(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ok := time.Now().Add(time.Hour)
	_, err = q.ScheduleBatch(context.Background(), []queue.NewTimer{{ID: "a", Due: ok}, {ID: "b", Due: ok}, {ID: "daily@1796238000000", Due: ok}})
	var fe *queue.FieldError
	if !errors.As(err, &fe) || fe.Item != 2 || fe.Field != "ID" || !errors.Is(err, queue.ErrOccurrenceID) {
		t.Fatalf("err %v (field error %+v), want a FieldError of item 2's ID wrapping ErrOccurrenceID", err, fe)
	}
	if !strings.HasPrefix(err.Error(), "timerq: batch item 2: invalid timer ID: ") || strings.HasPrefix(fe.Error(), "batch item") {
		t.Errorf("message %q, field error's %q", err, fe)
	}
}
