package firerecorder_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/firerecorder"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Shared(m)) }

// TestRecorderTellsTwoFiresFromOneSeenTwice plays what a failover leaves
// on two nodes: the same fire event (entry ID and fired time) on both is
// one fire; a second event of the same timer, on the other node, is a
// duplicate even after the first node's stream lost it; a wakeup counts
// without making an event.
func TestRecorderTellsTwoFiresFromOneSeenTwice(t *testing.T) {
	a, b := redistest.Start(t, redistest.Config{}), redistest.Start(t, redistest.Config{})
	ac, bc := a.Client(t), b.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	sp := keyspace.Shard(ns, 0, 1)
	rec, err := firerecorder.Start(ctx, firerecorder.Options{Nodes: []string{a.Addr(), b.Addr()}, Namespace: ns, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	xadd := func(on string, id, entry, fired string) {
		c := ac
		if on == "b" {
			c = bc
		}
		if err := c.Do(ctx, "XADD", sp.Fires(), entry, "id", id, "due", "1000", "fired", fired, "payload", "").Err(); err != nil {
			t.Fatal(err)
		}
	}
	// once: the same event on both nodes. twice: distinct events, the
	// first deleted again (as a resync would) once the recorder read it.
	xadd("a", "once", "2000-0", "2000")
	xadd("b", "once", "2000-0", "2000")
	xadd("a", "twice", "2000-1", "2000")
	redistest.Eventually(t, 10*time.Second, "the recorder to read twice on a", func() bool {
		return hasEvent(rec, "twice")
	})
	if err := ac.XDel(ctx, sp.Fires(), "2000-1").Err(); err != nil {
		t.Fatal(err)
	}
	xadd("b", "twice", "3000-0", "3000")
	xadd("b", "early", "3000-1", "999")
	if err := bc.Publish(ctx, sp.TimerChannel("once"), "fired").Err(); err != nil {
		t.Fatal(err)
	}
	// A wakeup makes the recorder read the record on the node that
	// delivered it, as a Get would: rec's fire there is the one its stream
	// entry shows; rec2's record shows a fire its stream entry does not.
	for _, r := range []struct{ id, fired string }{{"rec", "4000"}, {"rec2", "5000"}} {
		if err := ac.HSet(ctx, sp.Timers(), r.id, "f:1000:900:"+r.fired+":p").Err(); err != nil {
			t.Fatal(err)
		}
		if err := ac.Publish(ctx, sp.TimerChannel(r.id), "fired").Err(); err != nil {
			t.Fatal(err)
		}
	}
	redistest.Eventually(t, 10*time.Second, "the recorder to read the records", func() bool {
		rep := rec.Snapshot()
		return len(rep.Events["rec"]) == 1 && len(rep.Events["rec2"]) == 1
	})
	xadd("b", "rec", "4000-0", "4000")
	xadd("b", "rec2", "6000-0", "6000")
	redistest.Eventually(t, 10*time.Second, "the recorder to read b and hear the wakeup", func() bool {
		rep := rec.Snapshot()
		return len(rep.Events["twice"]) == 2 && len(rep.Events["early"]) == 1 && rep.Wakeups["once"] == 1 &&
			len(rep.Events["rec2"]) == 2 && rep.Events["rec"][0].EntryID == "4000-0"
	})
	rep := rec.Stop()
	if tw := rep.Twice(); len(tw) != 2 || tw[0][:5] != "rec2:" || tw[1][:6] != "twice:" {
		t.Errorf("Twice = %v; want rec2 and twice", tw)
	}
	if n := len(rep.Events["rec"]); n != 1 {
		t.Errorf("rec: %d events, want 1: %v", n, rep.Events["rec"])
	}
	if e := rep.Early(); len(e) != 1 || e[0][:6] != "early:" {
		t.Errorf("Early = %v; want only early", e)
	}
	if m := rep.Missing([]string{"once", "twice", "never"}); len(m) != 1 || m[0] != "never" {
		t.Errorf("Missing = %v; want never", m)
	}
}

func hasEvent(rec *firerecorder.Recorder, id string) bool { return len(rec.Snapshot().Events[id]) > 0 }
