package queue_test

import (
	"context"
	"errors"
	"fmt"
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

// plant writes a record by hand into the shard of id, as something other
// than timerq might: raw into the timers hash and, when set is not "", a
// member of that set (due, fired or cancelled) with the given score; in a
// shard of layout 2, a member of the sched set, score above the band of
// the state (bandOf) for a settled one.
func plant(t *testing.T, rdb redis.UniversalClient, q *queue.Queue, id, raw, set string, score float64) {
	t.Helper()
	ctx := context.Background()
	sp := idSpace(t, rdb, q, id)
	if err := rdb.HSet(ctx, sp.Timers(), id, raw).Err(); err != nil {
		t.Fatal(err)
	}
	key := map[string]string{"due": sp.Due(), "fired": sp.Fired(), "cancelled": sp.Cancelled()}[set]
	if sp.Layout() == 2 && set != "" && set != "due" {
		key = sp.Sched()
		score += bandOf(set[0])
	}
	if key != "" {
		if err := rdb.ZAdd(ctx, key, redis.Z{Score: score, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// idSpace is the shard that holds id, as spaceAt names it.
func idSpace(t *testing.T, rdb redis.UniversalClient, q *queue.Queue, id string) keyspace.Space {
	t.Helper()
	k, err := q.Inspect().ShardOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return spaceAt(t, rdb, q, k)
}

func firedIDs(fs []queue.Fired) []string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestMalformedRecordIsQuarantined is issue 26's poison record: a record
// written by hand into the timers hash, due among valid timers. The claim
// that meets it moves it, byte for byte, to the quarantine, and fires the
// valid timers of the same batch, each exactly once.
func TestMalformedRecordIsQuarantined(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		past := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		for i, id := range []string{"good-a", "good-b", "good-c"} {
			if _, err := q.Schedule(ctx, id, past.Add(time.Duration(2*i)*time.Millisecond), []byte(id)); err != nil {
				t.Fatal(err)
			}
		}
		// Between the valid ones in due order, so that the claim meets
		// them in one batch: bytes no decoder accepts, and a scheduled
		// record whose due score is no millisecond.
		badRaw := "x:\x00\xff:1::payload"
		plant(t, b.Client, q, "bad", badRaw, "due", float64(past.UnixMilli()+1))
		plant(t, b.Client, q, "badscore", "s::1::p", "due", -1.5)

		res, err := q.Engine().Claim(ctx, queue.MaxBatch)
		if err != nil {
			t.Fatalf("Claim with a malformed record due: %v", err)
		}
		if got := firedIDs(res.Fired); !slices.Equal(got, []string{"good-a", "good-b", "good-c"}) {
			t.Fatalf("fired %v, want the three valid timers", got)
		}
		reasons := map[string]string{}
		for _, n := range res.Quarantined {
			reasons[n.ID] = n.Reason
		}
		if len(res.Quarantined) != 2 || reasons["bad"] != "malformed record" || reasons["badscore"] != "due score is not a due time" {
			t.Fatalf("Quarantined = %+v, want bad and badscore with their reasons", res.Quarantined)
		}

		// Moved: the record is out of the timers hash and the due set, and
		// in the quarantine with its exact bytes.
		sp := idSpace(t, b.Client, q, "bad")
		if ok, _ := b.Client.HExists(ctx, sp.Timers(), "bad").Result(); ok {
			t.Error("the malformed record is still in the timers hash")
		}
		if err := b.Client.ZScore(ctx, sp.Due(), "bad").Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("the malformed record is still in the due set (%v)", err)
		}
		qs, err := q.Quarantine().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) != 2 || qs[0].ID != "bad" || string(qs[0].Raw) != badRaw || qs[0].Reason != "malformed record" ||
			!qs[0].QuarantinedAt.Equal(res.Now) || qs[1].ID != "badscore" || string(qs[1].Raw) != "s::1::p" || qs[1].DueScore != "-1.5" {
			t.Fatalf("Quarantine() = %+v", qs)
		}

		// Nothing more to do, and nothing fires twice.
		again, err := q.Engine().Claim(ctx, queue.MaxBatch)
		if err != nil || len(again.Fired) != 0 || len(again.Quarantined) != 0 {
			t.Fatalf("second claim: %+v, %v", again, err)
		}
		if l, _ := b.Client.XLen(ctx, sp.Fires()).Result(); l != 3 {
			t.Errorf("fire stream holds %d entries, want 3", l)
		}
		c, err := q.Inspect().Counters(ctx)
		if err != nil || c.Quarantined != 2 || c.Fired != 3 {
			t.Errorf("Counters = %+v, %v; want 2 quarantined and 3 fired", c, err)
		}
		mustBeConsistent(t, b.Client, q, "claim with malformed records")

		// The ID is free again, and dropping is final.
		if _, err := q.Schedule(ctx, "bad", time.Now().Add(time.Hour), nil); err != nil {
			t.Errorf("schedule the quarantined ID again: %v", err)
		}
		if ok, err := q.Quarantine().Drop(ctx, "bad"); !ok || err != nil {
			t.Errorf("DropQuarantined(bad) = %v, %v", ok, err)
		}
		if ok, err := q.Quarantine().Drop(ctx, "bad"); ok || err != nil {
			t.Errorf("second DropQuarantined(bad) = %v, %v; want false", ok, err)
		}
		if qs, _ := q.Quarantine().List(ctx); len(qs) != 1 || qs[0].ID != "badscore" {
			t.Errorf("after the drop Quarantine() = %+v", qs)
		}
	})
}

// TestListSkipsMalformedRecords: a listing reports malformed records apart
// and goes on, page after page, each record once, whichever set it is in.
func TestListSkipsMalformedRecords(t *testing.T) {
	forEachLayout(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		var want []string
		for i := range 5 {
			id := "good-" + string(rune('a'+i))
			want = append(want, id)
			if _, err := q.Schedule(ctx, id, base.Add(time.Duration(i)*time.Second), nil); err != nil {
				t.Fatal(err)
			}
		}
		plant(t, b.Client, q, "bad-due", "garbage", "due", float64(base.UnixMilli()+1500))
		plant(t, b.Client, q, "bad-fired", "f:1:2:", "fired", float64(base.UnixMilli()+2500))
		plant(t, b.Client, q, "bad-sched", "s:5:1::p", "due", float64(base.UnixMilli()+3500))

		var got, bad []string
		o := queue.ListOptions{Limit: 2}
		for pages := 0; ; pages++ {
			page, err := q.List(ctx, o)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			for _, tm := range page.Timers {
				got = append(got, tm.ID)
			}
			for _, m := range page.Malformed {
				bad = append(bad, m.ID)
			}
			if page.NextCursor == "" {
				break
			}
			if pages > 10 {
				t.Fatal("List does not end")
			}
			o.Cursor = page.NextCursor
		}
		slices.Sort(bad)
		if !slices.Equal(got, want) || !slices.Equal(bad, []string{"bad-due", "bad-fired", "bad-sched"}) {
			t.Fatalf("listed %v and malformed %v; want %v and the three planted", got, bad, want)
		}
		if _, err := q.Get(ctx, "bad-sched"); !errors.Is(err, queue.ErrMalformedRecord) {
			t.Errorf("Get(bad-sched) = %v, want ErrMalformedRecord", err)
		}
	})
}

// TestQuarantineRefusedChangesNothing: a worker lacking a right that only
// quarantining needs (HDEL on the timers hash: untraced claims never
// delete) gets ErrPermission naming it, and the claim wrote nothing, not
// even the valid timers' fires.
func TestQuarantineRefusedChangesNothing(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	prefix := "timerq:{" + ns + "}:"
	aq, err := queue.New(admin, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer aq.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "nohdel", "reset", "on", ">pw", "~"+prefix+"*", "&"+prefix+"*", "+@all", "-hdel").Err(); err != nil {
		t.Fatal(err)
	}
	uc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "nohdel", Password: "pw"})
	defer uc.Close()
	uq, err := queue.New(uc, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer uq.Close()

	// Without a malformed record the user claims fine.
	schedule(t, aq, "ok-1", time.Now().Add(-time.Second))
	if res, err := uq.Engine().Claim(ctx, queue.MaxBatch); err != nil || len(res.Fired) != 1 {
		t.Fatalf("claim without a malformed record: %+v, %v", res, err)
	}
	schedule(t, aq, "ok-2", time.Now().Add(-time.Second))
	plant(t, admin, aq, "bad", "garbage", "due", float64(time.Now().Add(-2*time.Second).UnixMilli()))
	before := snapshot(t, admin, aq)
	_, err = uq.Engine().Claim(ctx, queue.MaxBatch)
	if !errors.Is(err, queue.ErrPermission) || !strings.Contains(err.Error(), "may not run HDEL") || !strings.Contains(err.Error(), "+hdel") {
		t.Fatalf("Claim = %v, want ErrPermission naming HDEL and +hdel", err)
	}
	if after := snapshot(t, admin, aq); after != before {
		t.Fatalf("the refused claim changed the namespace:\nbefore %s\nafter  %s", before, after)
	}
	if qs, err := aq.Quarantine().List(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("Quarantine() = %+v, %v; want empty", qs, err)
	}
	// The admin, with the right, quarantines it and fires ok-2.
	res, err := aq.Engine().Claim(ctx, queue.MaxBatch)
	if err != nil || len(res.Fired) != 1 || res.Fired[0].ID != "ok-2" || len(res.Quarantined) != 1 {
		t.Fatalf("admin claim: %+v, %v", res, err)
	}
}

// TestQuarantineTakesTheTimersMeta: a timer with an owner or labels whose
// record something else overwrote is quarantined by the claim, or by the
// hold of a namespace with replicas, with its meta and its owner index
// entry: the timer is gone, so neither may outlive it. Left behind, they
// leaked for ever (nothing but purge, of settled timers, removes them),
// and the ID, free to be scheduled again, came back with the old owner
// and labels: its owner's NextWake counted it, a bulk cancel by that owner
// would have cancelled it. In both layouts (layout2 below, and
// TIMERQ_TEST_LAYOUT=2 for the first).
func TestQuarantineTakesTheTimersMeta(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		for _, layout := range []int{1, 2} {
			t.Run(fmt.Sprint("layout", layout), func(t *testing.T) {
				ctx := context.Background()
				q := newQueue(t, b, queue.Options{})
				if layout == 2 {
					upgradeAll(t, q, 100)
				}
				past := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
				later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
				labels := map[string]string{"team": "a"}
				if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{
					{ID: "bad", Due: past, Owner: "wf", Labels: labels},
					{ID: "badl", Due: past, Labels: labels},
					{ID: "held", Due: past.Add(-time.Millisecond), Owner: "wf", Labels: labels},
					{ID: "good", Due: past, Owner: "wf"},
					{ID: "later", Due: later, Owner: "wf"},
				}); err != nil {
					t.Fatal(err)
				}
				sp := idSpace(t, b.Client, q, "bad")
				for _, id := range []string{"bad", "badl", "held"} {
					if err := b.Client.HSet(ctx, sp.Timers(), id, "garbage").Err(); err != nil {
						t.Fatal(err)
					}
					// As a traced timer that delivers to an endpoint has them.
					if err := b.Client.HSet(ctx, sp.Traces(), id, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").Err(); err != nil {
						t.Fatal(err)
					}
					if err := b.Client.HSet(ctx, sp.Deliveries(), id, "old-endpoint").Err(); err != nil {
						t.Fatal(err)
					}
				}
				// The hold first, as a claim in a namespace with replicas
				// runs it, of the earliest due timer alone: held.
				hold := redis.NewScript(lua.Hold.At(sp.Layout()).Source)
				r, err := hold.Run(ctx, b.Client, lua.Hold.Keys(sp, ""), 1, 60000, "tok", "").StringSlice()
				if err != nil || len(r) != 6 || r[2] != "none" || r[3] != "1" || r[4] != "held" {
					t.Fatalf("hold of held = %q, %v; want it quarantined and nothing held", r, err)
				}
				if ok, err := b.Client.HExists(ctx, sp.TimerMeta(), "held").Result(); ok || err != nil {
					t.Errorf("the hold left the quarantined held's meta in %s (%v)", sp.TimerMeta(), err)
				}
				if err := b.Client.ZScore(ctx, sp.Owners(), "wf\x00held").Err(); !errors.Is(err, redis.Nil) {
					t.Errorf("the hold left the quarantined held's owner index entry (%v)", err)
				}

				res, err := q.Engine().Claim(ctx, queue.MaxBatch)
				if err != nil {
					t.Fatalf("Claim: %v", err)
				}
				if got := firedIDs(res.Fired); !slices.Equal(got, []string{"good"}) || len(res.Quarantined) != 2 {
					t.Fatalf("claim fired %v and quarantined %+v; want good fired, bad and badl quarantined", got, res.Quarantined)
				}
				for _, id := range []string{"bad", "badl", "held"} {
					if ok, err := b.Client.HExists(ctx, sp.TimerMeta(), id).Result(); ok || err != nil {
						t.Errorf("the quarantined %s's meta stayed in %s (%v)", id, sp.TimerMeta(), err)
					}
				}
				// Nor may the ID, scheduled again, fire into the old trace
				// or be delivered to the old endpoint.
				for _, key := range []string{sp.Traces(), sp.Deliveries()} {
					if left, err := b.Client.HKeys(ctx, key).Result(); err != nil || len(left) != 0 {
						t.Errorf("%s keeps the fields of %q after the quarantine (%v)", key, left, err)
					}
				}
				if n, err := b.Client.ZRange(ctx, sp.Owners(), 0, -1).Result(); err != nil || !slices.Equal(n, []string{"wf\x00good", "wf\x00later"}) {
					t.Errorf("owner index holds %q (%v); want the entries of good and later only", n, err)
				}

				// The ID again, without meta: a timer of its own.
				if _, err := q.Schedule(ctx, "bad", later.Add(time.Minute), nil); err != nil {
					t.Fatal(err)
				}
				if tm, err := q.Get(ctx, "bad"); err != nil || tm.Owner != "" || tm.Labels != nil {
					t.Errorf("bad scheduled again without meta: %+v, %v; want no owner and no labels", tm, err)
				}
				if w, err := q.NextWake(ctx, "wf"); err != nil || w.Scheduled != 1 || !w.Next.Equal(later) {
					t.Errorf("NextWake(wf) = %+v, %v; want later alone", w, err)
				}
				mustBeConsistent(t, b.Client, q, "the quarantined ID scheduled again")
			})
		}
	})
}
