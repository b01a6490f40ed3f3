package queue_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/scripts/lua"
)

// upgradeAll runs queue.Engine.UpgradeLayout until the namespace is done,
// and returns how many steps it took.
func upgradeAll(t *testing.T, q *queue.Queue, limit int) int {
	t.Helper()
	for steps := 1; ; steps++ {
		st, err := q.Engine().UpgradeLayout(context.Background(), limit)
		if err != nil {
			t.Fatalf("UpgradeLayout: %v", err)
		}
		if st.Done() {
			return steps
		}
		if steps > 1000 {
			t.Fatalf("UpgradeLayout: not done after %d steps: %+v", steps, st)
		}
	}
}

// A namespace upgraded to layout 2 keeps every timer in its state: the
// scheduled ones fire once, at their time, the settled ones read, list,
// count and purge as they did, an idempotent Schedule of a fired ID still
// reports it fired, and a layout-1 script is refused before it writes.
func TestUpgradeLayoutKeepsEveryTimer(t *testing.T) {
	t.Parallel()
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{Retention: time.Hour})
		now := time.Now()
		for _, id := range []string{"past-1", "past-2"} {
			if _, err := q.Schedule(ctx, id, now.Add(-time.Second), []byte(id)); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"later-1", "later-2", "gone"} {
			if _, err := q.Schedule(ctx, id, now.Add(time.Hour), []byte(id)); err != nil {
				t.Fatal(err)
			}
		}
		soon := now.Add(400 * time.Millisecond)
		if _, err := q.Schedule(ctx, "soon", soon, []byte("soon")); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Engine().Claim(ctx, 100); err != nil || len(res.Fired) != 2 {
			t.Fatalf("Claim before the upgrade = %+v, %v; want past-1 and past-2", res.Fired, err)
		}
		if _, err := q.Cancel(ctx, "gone"); err != nil {
			t.Fatal(err)
		}

		// One settled timer a step: the drain of one shard takes several.
		if steps := upgradeAll(t, q, 1); steps < 3 && b.Shards == 0 && !layout2() {
			t.Errorf("UpgradeLayout took %d steps with a limit of 1 and 3 settled timers; want at least 3", steps)
		}
		if steps := upgradeAll(t, q, 1); steps != 1 {
			t.Errorf("UpgradeLayout of an upgraded namespace took %d steps; want 1", steps)
		}

		// A process that has not met layout 2 yet.
		q2 := newQueue(t, b, queue.Options{Namespace: q.Namespace(), Retention: time.Hour})
		want := map[string]queue.State{"past-1": queue.StateFired, "past-2": queue.StateFired, "gone": queue.StateCancelled,
			"later-1": queue.StateScheduled, "later-2": queue.StateScheduled, "soon": queue.StateScheduled}
		for id, st := range want {
			tm, err := q2.Get(ctx, id)
			if err != nil || tm.State != st || string(tm.Payload) != id {
				t.Errorf("Get(%s) after the upgrade = %+v, %v; want %s with its payload", id, tm, err, st)
			}
		}
		if res, err := q2.Schedule(ctx, "past-1", now.Add(time.Hour), nil); err != nil || res.Created || res.Timer.State != queue.StateFired {
			t.Errorf("Schedule of a fired ID after the upgrade = %+v, %v; want the fired timer, not created", res, err)
		}
		page, err := q2.List(ctx, queue.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, tm := range page.Timers {
			listed = append(listed, tm.ID)
		}
		slices.Sort(listed)
		if wantIDs := []string{"gone", "later-1", "later-2", "past-1", "past-2", "soon"}; !slices.Equal(listed, wantIDs) {
			t.Errorf("List after the upgrade = %v; want %v", listed, wantIDs)
		}
		for st, ids := range map[queue.State][]string{queue.StateFired: {"past-1", "past-2"}, queue.StateCancelled: {"gone"},
			queue.StateScheduled: {"later-1", "later-2", "soon"}} {
			page, err := q2.List(ctx, queue.ListOptions{State: st})
			if err != nil || len(page.Timers) != len(ids) {
				t.Errorf("List(%s) after the upgrade = %+v, %v; want %v", st, page.Timers, err, ids)
			}
		}
		stats, err := q2.Stats(ctx)
		if err != nil || stats.Scheduled != 3 || stats.Fired != 2 || stats.Cancelled != 1 {
			t.Errorf("Stats after the upgrade = %+v, %v; want 3 scheduled, 2 fired, 1 cancelled", stats, err)
		}

		// A scheduled timer fires once, not before its time.
		var fired []string
		for deadline := time.Now().Add(10 * time.Second); len(fired) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			res, err := q2.Engine().Claim(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range res.Fired {
				// A fire time is the server's millisecond, floored.
				if res.Now.Before(soon.Truncate(time.Millisecond)) {
					t.Errorf("%s fired at %v, before its due time %v", f.ID, res.Now, soon)
				}
				fired = append(fired, f.ID)
			}
		}
		if !slices.Equal(fired, []string{"soon"}) {
			t.Fatalf("fired after the upgrade: %v; want [soon]", fired)
		}
		if res, err := q2.Engine().Claim(ctx, 100); err != nil || len(res.Fired) != 0 {
			t.Errorf("a second Claim = %+v, %v; want nothing", res.Fired, err)
		}
		if _, err := q2.Cancel(ctx, "later-2"); err != nil {
			t.Fatal(err)
		}
		stats, err = q2.Stats(ctx)
		if err != nil || stats.Scheduled != 1 || stats.Fired != 3 || stats.Cancelled != 2 {
			t.Errorf("Stats after a fire and a cancel = %+v, %v; want 1 scheduled, 3 fired, 2 cancelled", stats, err)
		}

		// Layout 1's scripts stop at the marker before writing.
		sp := keyspace.Shard(q.Namespace(), 0, 1)
		if b.Shards > 0 {
			sp = keyspace.Shard(q.Namespace(), keyspace.ShardOf("later-1", b.Shards), b.Shards)
		}
		keys := append(sp.Keys(), sp.Traces(), sp.Quarantine(), sp.Deliveries())
		err = b.Client.Eval(ctx, lua.Claim.Source, keys, 100, 0, 0, sp.TimerChannelPrefix()).Err()
		if err == nil || !strings.Contains(err.Error(), "TIMERQ_LAYOUT 2") {
			t.Errorf("layout 1's claim on an upgraded shard: %v; want TIMERQ_LAYOUT 2", err)
		}
		if n, err := b.Client.ZCard(ctx, sp.Sched()).Result(); err != nil || n == 0 {
			t.Errorf("ZCARD %s = %d, %v; want the shard's timers", sp.Sched(), n, err)
		}

		// Purge applies the retention to the settle times.
		short := newQueue(t, b, queue.Options{Namespace: q.Namespace(), Retention: time.Millisecond})
		time.Sleep(5 * time.Millisecond)
		if removed, more, err := short.Engine().Purge(ctx, 100); err != nil || removed != 5 || more {
			t.Errorf("Purge = %d, %v, %v; want the 5 settled timers", removed, more, err)
		}
		if _, err := q2.Get(ctx, "past-1"); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("Get of a purged timer: %v; want ErrNotFound", err)
		}
		if tm, err := q2.Get(ctx, "later-1"); err != nil || tm.State != queue.StateScheduled {
			t.Errorf("Get(later-1) after the purge = %+v, %v; want it scheduled", tm, err)
		}
	})
}

// layout2 reports whether the tests run with every namespace upgraded to
// layout 2 on first use (TIMERQ_TEST_LAYOUT=2, layout2_export_test.go).
func layout2() bool { return os.Getenv("TIMERQ_TEST_LAYOUT") == "2" }

// A Queue learns an upgraded shard's layout with a GET of its legacy due
// key, a right every role of docs/security.md has, so the reads that use
// plain commands (Usage, DueHistogram) name the sched set on layout 2 for
// a user without any other string command.
func TestPlainReadsFollowLayout2WithGetOnly(t *testing.T) {
	redistest.Require(t)
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ns := redistest.Namespace(t)
	q := newQueue(t, &redistest.Backend{Name: "real", Client: admin, Real: srv}, queue.Options{Namespace: ns})
	for _, id := range []string{"a", "b"} {
		if _, err := q.Schedule(ctx, id, time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
	}
	upgradeAll(t, q, 100)
	if err := admin.Do(ctx, "ACL", "SETUSER", "getonly", "on", ">pw", "~timerq:*", "&*", "+@all",
		"-getrange", "-substr", "-getex", "-strlen").Err(); err != nil {
		t.Fatal(err)
	}
	uc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "getonly", Password: "pw"})
	t.Cleanup(func() { uc.Close() })
	uq, err := queue.New(uc, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uq.Close() })
	u, err := uq.Inspect().Usage(ctx)
	if err != nil || u.Pending != 2 {
		t.Errorf("Usage on layout 2 = %+v, %v; want 2 pending", u, err)
	}
	h, err := uq.Inspect().DueHistogram(ctx, time.Now(), []time.Duration{2 * time.Hour})
	if err != nil || h[1] != 2 {
		t.Errorf("DueHistogram on layout 2 = %v, %v; want the 2 timers within 2h", h, err)
	}
}
