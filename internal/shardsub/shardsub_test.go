package shardsub_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/shardsub"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Shared(m)) }

// watcher reads a Sub's events into per-channel state that tests wait on.
type watcher struct {
	t    *testing.T
	sub  *shardsub.Sub
	subs map[string]int      // confirmations per channel
	msgs map[string][]string // payloads per channel
}

func newWatcher(t *testing.T, rdb redis.UniversalClient, sharded bool) *watcher {
	t.Helper()
	s := shardsub.New(rdb, sharded, 1024)
	t.Cleanup(func() { _ = s.Close() })
	return &watcher{t: t, sub: s, subs: map[string]int{}, msgs: map[string][]string{}}
}

// until reads events until done, which sees each event (nil at first),
// holds, failing the test after d.
func (w *watcher) until(d time.Duration, what string, done func(e *shardsub.Event) bool) {
	w.t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for e := (*shardsub.Event)(nil); !done(e); {
		select {
		case ev, ok := <-w.sub.Events():
			if !ok {
				w.t.Fatalf("events closed while waiting for %s", what)
			}
			if ev.Subscribed {
				w.subs[ev.Channel]++
			} else {
				w.msgs[ev.Channel] = append(w.msgs[ev.Channel], ev.Payload)
			}
			e = &ev
		case <-deadline.C:
			w.t.Fatalf("no %s within %v", what, d)
		}
	}
}

// each waits until ok holds for every channel, checking a channel again
// only when an event names it.
func (w *watcher) each(what string, chs []string, ok func(ch string) bool) {
	w.t.Helper()
	left := map[string]bool{}
	for _, ch := range chs {
		if !ok(ch) {
			left[ch] = true
		}
	}
	w.until(20*time.Second, fmt.Sprintf("%s on %d of %d channels", what, len(left), len(chs)), func(e *shardsub.Event) bool {
		if e != nil && left[e.Channel] && ok(e.Channel) {
			delete(left, e.Channel)
		}
		return len(left) == 0
	})
}

// subscribed waits until every channel has at least n confirmations.
func (w *watcher) subscribed(n int, chs ...string) {
	w.t.Helper()
	w.each(fmt.Sprintf("confirmation %d", n), chs, func(ch string) bool { return w.subs[ch] >= n })
}

// received waits until the last message of every channel is payload.
func (w *watcher) received(payload string, chs ...string) {
	w.t.Helper()
	w.each(fmt.Sprintf("message %q", payload), chs, func(ch string) bool {
		got := w.msgs[ch]
		return len(got) > 0 && got[len(got)-1] == payload
	})
}

func publish(t *testing.T, rdb redis.UniversalClient, sharded bool, payload string, chs ...string) {
	t.Helper()
	ctx := context.Background()
	for _, ch := range chs {
		var err error
		if sharded {
			err = rdb.SPublish(ctx, ch, payload).Err()
		} else {
			err = rdb.Publish(ctx, ch, payload).Err()
		}
		if err != nil {
			t.Fatalf("publish to %s: %v", ch, err)
		}
	}
}

// channels returns n channel names of the test, spread over many slots.
func channels(t *testing.T, n int) []string {
	ns := redistest.Namespace(t)
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("shardsub:{%s:%d}:wake", ns, i)
	}
	return out
}

func modes(t *testing.T, fn func(t *testing.T, sharded bool)) {
	for _, sharded := range []bool{false, true} {
		name := "classic"
		if sharded {
			name = "sharded"
		}
		t.Run(name, func(t *testing.T) { fn(t, sharded) })
	}
}

// TestReconnectAfterServerDropsConnection: when the server drops the
// pub/sub connection (CLIENT KILL, as a restart or a network cut does),
// the Sub reconnects by itself, reports every channel as subscribed again
// and delivers what is published afterwards.
func TestReconnectAfterServerDropsConnection(t *testing.T) {
	modes(t, func(t *testing.T, sharded bool) {
		// CLIENT KILL TYPE pubsub hits every subscriber of the server: a
		// server of its own.
		srv := redistest.Start(t, redistest.Config{})
		rdb := srv.Client(t)
		w := newWatcher(t, rdb, sharded)
		chs := channels(t, 5)
		if err := w.sub.Subscribe(context.Background(), chs...); err != nil {
			t.Fatal(err)
		}
		w.subscribed(1, chs...)
		publish(t, rdb, sharded, "before", chs...)
		w.received("before", chs...)

		killed, err := rdb.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Result()
		if err != nil || killed != 1 {
			t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want the Sub's one connection", killed, err)
		}
		w.subscribed(2, chs...)
		publish(t, rdb, sharded, "after", chs...)
		w.received("after", chs...)
		if n := w.sub.Conns(); n != 1 {
			t.Errorf("%d connections after the reconnect, want 1", n)
		}
	})
}

// TestManyChannelsOneConnection: thousands of channels share one
// connection on a standalone server, in both modes, and each gets its own
// messages.
func TestManyChannelsOneConnection(t *testing.T) {
	modes(t, func(t *testing.T, sharded bool) {
		rdb := redistest.SharedServer(t).Client(t)
		w := newWatcher(t, rdb, sharded)
		chs := channels(t, 3000)
		if err := w.sub.Subscribe(context.Background(), chs...); err != nil {
			t.Fatal(err)
		}
		w.subscribed(1, chs...)
		if n := w.sub.Conns(); n != 1 {
			t.Fatalf("%d connections for %d channels, want 1", n, len(chs))
		}
		publish(t, rdb, sharded, "hello", chs...)
		w.received("hello", chs...)
		// Unsubscribed channels get nothing more. One server delivers in
		// the order of publishing, so once the last channel published has
		// its message, any for the others would have come.
		w.sub.Unsubscribe(context.Background(), chs[1:]...)
		publish(t, rdb, sharded, "again", chs[1:]...)
		publish(t, rdb, sharded, "again", chs[0])
		w.received("again", chs[0])
		for _, ch := range chs[1:] {
			if got := w.msgs[ch]; len(got) != 1 {
				t.Fatalf("%s got %q after its unsubscribe, want only the first message", ch, got)
			}
		}
	})
}

// TestManyChannelsOnACluster: sharded channels over every slot range take
// one connection per master, and each channel gets its messages.
func TestManyChannelsOnACluster(t *testing.T) {
	c := redistest.SharedCluster(t)
	rdb := c.Client(t)
	w := newWatcher(t, rdb, true)
	chs := channels(t, 2000)
	if err := w.sub.Subscribe(context.Background(), chs...); err != nil {
		t.Fatal(err)
	}
	w.subscribed(1, chs...)
	if n := w.sub.Conns(); n != len(c.Nodes) {
		t.Fatalf("%d connections for %d channels on %d masters, want one per master", n, len(chs), len(c.Nodes))
	}
	publish(t, rdb, true, "hello", chs...)
	w.received("hello", chs...)
	if n := w.sub.Rebuilds(); n != 0 {
		t.Errorf("%d rebuilds without a slot move", n)
	}
}

// TestSlotMoveResubscribesOnTheNewOwner: when a channel's slot moves to
// another master, Redis drops its subscription there (sunsubscribe); the
// Sub rebuilds that connection, subscribes the channel on the new owner,
// reports it subscribed again, and its messages arrive; channels of other
// slots keep theirs.
func TestSlotMoveResubscribesOnTheNewOwner(t *testing.T) {
	// Moving a slot changes the Cluster for everyone: one of its own.
	c := redistest.StartCluster(t, 3, nil)
	rdb := c.Client(t)
	w := newWatcher(t, rdb, true)
	chs := channels(t, 40)
	if err := w.sub.Subscribe(context.Background(), chs...); err != nil {
		t.Fatal(err)
	}
	w.subscribed(1, chs...)
	moving := chs[0]
	from := c.ServerFor(t, moving)
	to := c.Nodes[0]
	if to == from {
		to = c.Nodes[1]
	}
	if err := c.MigrateSlot(t, keyspace.Slot(moving), to, 0); err != nil {
		t.Fatal(err)
	}
	w.subscribed(2, moving)
	if c.ServerFor(t, moving) != to {
		t.Fatalf("slot of %s did not move", moving)
	}
	if n := w.sub.Rebuilds(); n < 1 {
		t.Errorf("%d rebuilds after a slot move, want at least 1", n)
	}
	// The Cluster client learns the new owner from MOVED on its own.
	publish(t, rdb, true, "moved", chs...)
	w.received("moved", chs...)
	if n := w.sub.Conns(); n != len(c.Nodes) {
		t.Errorf("%d connections after the move, want one per master", n)
	}
}

// TestCloseEndsEvents: Close returns even while a reader is blocked
// handing over an event nobody reads, closes Events, stops every reader
// (goleak checks the goroutines), and is safe to call twice.
func TestCloseEndsEvents(t *testing.T) {
	rdb := redistest.SharedServer(t).Client(t)
	s := shardsub.New(rdb, true, 1)
	if err := s.Subscribe(context.Background(), channels(t, 50)...); err != nil {
		t.Fatal(err)
	}
	// The buffer holds one of the 50 confirmations; the reader then blocks
	// on the second.
	redistest.Eventually(t, 10*time.Second, "a confirmation in the buffer", func() bool { return len(s.Events()) == 1 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s: a reader is stuck handing over an event")
	}
	for range s.Events() {
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Subscribe(context.Background(), "late"); err != nil {
		t.Fatalf("Subscribe after Close = %v, want nil (ignored)", err)
	}
}
