package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	sched "github.com/timerq/timerq/schedule"
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

// TestFieldErrorNamesEachField: each refusal of a field of NewTimer,
// Recurring and DebounceOptions is a FieldError naming the Go field (the
// HTTP API maps it to its JSON field), and wraps its sentinel; the text
// is the refusal's, starting with "timerq: " once.
func TestFieldErrorNamesEachField(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t), MaxPayloadBytes: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	timer := func(f func(*queue.NewTimer)) error {
		n := queue.NewTimer{ID: "a", Due: due}
		f(&n)
		_, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "ok", Due: due}, n})
		return err
	}
	rec := func(f func(*queue.Recurring)) error {
		r := queue.Recurring{ID: "s", Every: time.Hour}
		f(&r)
		_, _, err := q.Recurring().Put(ctx, r)
		return err
	}
	debounce := func(f func(*queue.DebounceOptions)) error {
		o := queue.DebounceOptions{Delay: time.Second, MaxWait: time.Minute}
		f(&o)
		_, err := q.Debounce(ctx, "k", o)
		return err
	}
	zurich, _ := time.LoadLocation("Europe/Zurich")
	cases := []struct {
		name  string
		err   error
		item  int
		field string
		is    error
	}{
		{"timer ID", timer(func(n *queue.NewTimer) { n.ID = "" }), 1, "ID", queue.ErrInvalidID},
		{"timer due", timer(func(n *queue.NewTimer) { n.Due = time.Time{} }), 1, "Due", queue.ErrInvalidDue},
		{"timer delay", timer(func(n *queue.NewTimer) { *n = queue.NewTimerIn("a", -time.Second, nil) }), 1, "In", queue.ErrInvalidDue},
		{"timer payload", timer(func(n *queue.NewTimer) { n.Payload = []byte("12345") }), 1, "Payload", queue.ErrPayloadTooLarge},
		{"timer endpoint", timer(func(n *queue.NewTimer) { n.Endpoint = "a b" }), 1, "Endpoint", queue.ErrInvalidEndpoint},
		{"timer flow key", timer(func(n *queue.NewTimer) { n.FlowKey = "a\x01" }), 1, "FlowKey", queue.ErrInvalidFlowPolicy},
		{"timer URL", timer(func(n *queue.NewTimer) { n.Endpoint, n.URL = "e", "ftp://example.com/" }), 1, "URL", queue.ErrInvalidOptions},
		{"timer URL without endpoint", timer(func(n *queue.NewTimer) { n.URL = "https://example.com/" }), 1, "Endpoint", queue.ErrInvalidOptions},
		{"schedule ID", rec(func(r *queue.Recurring) { r.ID = strings.Repeat("s", 241) }), 0, "ID", queue.ErrInvalidID},
		{"schedule spec", rec(func(r *queue.Recurring) { r.Every, r.Spec = 0, "61 * * * *" }), 0, "Spec", nil},
		{"schedule interval", rec(func(r *queue.Recurring) { r.Every = time.Microsecond }), 0, "Every", nil},
		{"schedule location", rec(func(r *queue.Recurring) { r.Location = zurich }), 0, "Location", nil},
		{"schedule anchor", rec(func(r *queue.Recurring) { r.Anchor = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) }), 0, "Anchor", nil},
		{"schedule catch-up", rec(func(r *queue.Recurring) { r.CatchUp = "some" }), 0, "CatchUp", nil},
		{"schedule catch-up limit", rec(func(r *queue.Recurring) { r.CatchUpLimit = -1 }), 0, "CatchUpLimit", nil},
		{"schedule ahead", rec(func(r *queue.Recurring) { r.Ahead = 101 }), 0, "Ahead", nil},
		{"schedule overlap", rec(func(r *queue.Recurring) { r.Overlap = "never" }), 0, "Overlap", nil},
		{"schedule jitter", rec(func(r *queue.Recurring) { r.Jitter = -time.Second }), 0, "Jitter", nil},
		{"schedule max count", rec(func(r *queue.Recurring) { r.MaxCount = -1 }), 0, "MaxCount", nil},
		{"schedule end", rec(func(r *queue.Recurring) { r.End = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }), 0, "End", nil},
		{"schedule payload", rec(func(r *queue.Recurring) { r.Payload = []byte("12345") }), 0, "Payload", queue.ErrPayloadTooLarge},
		{"schedule endpoint", rec(func(r *queue.Recurring) { r.Endpoint = "a b" }), 0, "Endpoint", queue.ErrInvalidEndpoint},
		{"schedule flow key", rec(func(r *queue.Recurring) { r.FlowKey = "a\x01" }), 0, "FlowKey", queue.ErrInvalidFlowPolicy},
		{"schedule URL", rec(func(r *queue.Recurring) { r.Endpoint, r.URL = "e", "ftp://example.com/" }), 0, "URL", queue.ErrInvalidOptions},
		{"debounce delay", debounce(func(o *queue.DebounceOptions) { o.Delay = 0 }), 0, "Delay", queue.ErrInvalidOptions},
		{"debounce max wait", debounce(func(o *queue.DebounceOptions) { o.MaxWait = time.Millisecond }), 0, "MaxWait", queue.ErrInvalidOptions},
		{"debounce payload", debounce(func(o *queue.DebounceOptions) { o.Payload = []byte("12345") }), 0, "Payload", queue.ErrPayloadTooLarge},
		{"debounce endpoint", debounce(func(o *queue.DebounceOptions) { o.Endpoint = "a b" }), 0, "Endpoint", queue.ErrInvalidEndpoint},
	}
	for _, c := range cases {
		var fe *queue.FieldError
		if !errors.As(c.err, &fe) || fe.Field != c.field || fe.Item != c.item {
			t.Errorf("%s: %v (field error %+v), want a FieldError of item %d's %s", c.name, c.err, fe, c.item, c.field)
			continue
		}
		if c.is == nil {
			c.is = sched.ErrInvalidSchedule
		}
		if !errors.Is(c.err, c.is) {
			t.Errorf("%s: %v does not wrap %v", c.name, c.err, c.is)
		}
		if msg := fe.Error(); !strings.HasPrefix(msg, "timerq: ") || strings.Count(msg, "timerq: ") != 1 {
			t.Errorf("%s: %q does not carry the prefix exactly once", c.name, msg)
		}
	}
}
