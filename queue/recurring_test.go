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
	sched "github.com/timerq/timerq/schedule"
)

// clock drives the Redis server's clock: miniredis's is set (SetTime moves
// the clock the scripts read); a real server's can only be waited for.
type clock struct {
	b   *redistest.Backend
	now time.Time
}

func newClock(b *redistest.Backend, start time.Time) *clock {
	c := &clock{b: b, now: start}
	if b.Mini != nil {
		b.Mini.SetTime(start)
	}
	return c
}

func (c *clock) advance(d time.Duration) {
	if c.b.Mini != nil {
		c.now = c.now.Add(d)
		c.b.Mini.SetTime(c.now)
		return
	}
	// A real sleep: a real server's clock is the wall clock, so letting
	// its time pass is the only way to advance it.
	time.Sleep(d)
}

// reach brings the server clock to at: miniredis's is set there (if it is
// not past it already), a real server's is waited for, so that a timer due
// at at is claimable on both.
func (c *clock) reach(t *testing.T, at time.Time) {
	t.Helper()
	if c.b.Mini == nil {
		redistest.AwaitServerTime(t, c.b.Client, at)
		return
	}
	if at.After(c.now) {
		c.now = at
		c.b.Mini.SetTime(at)
	}
}

// round is one fireAndArm with the server times read just before its claim
// and just after its arm. The arm plans from the server clock at one
// instant between the two: on miniredis they are that instant, on a real
// server as far apart as a loaded machine made them, so a test judges what
// was due "now" against both instead of assuming that no boundary of the
// schedule passed in between.
type round struct {
	fired    []queue.Fired
	from, to time.Time
}

func fireAndArmTimed(t *testing.T, b *redistest.Backend, q *queue.Queue) round {
	t.Helper()
	from := serverNow(t, b)
	fired := fireAndArm(t, q)
	return round{fired: fired, from: from, to: serverNow(t, b)}
}

// checkTopUp asserts that the arm of r left ahead occurrences in the
// future: the pending ones not fired by the claim and the ones it armed
// after its now, which lies in [r.from, r.to]. Pending occurrences due by
// then are missed ones the catch-up policy armed, which the caller judges.
func checkTopUp(t *testing.T, r round, pending []queue.Occurrence, ahead int) {
	t.Helper()
	after := func(at time.Time) int {
		n := 0
		for _, o := range pending {
			if o.Nominal.After(at) {
				n++
			}
		}
		return n
	}
	if after(r.to) > ahead || after(r.from) < ahead {
		t.Fatalf("pending %v after an arm between %v and %v; want %d after the arm's now", nominals(pending), r.from, r.to, ahead)
	}
}

// soonThenHourly returns a schedule whose first occurrence is due lead
// after the server's now and the next ones an hour apart. A test that
// needs "the first fired, the second not yet due" waits for the first on
// any server's clock, and no stall of a loaded machine brings the second
// due meanwhile, as it can with an interval of a few hundred ms. The put
// must come within lead of this call; a test checks the first occurrence
// it got.
func soonThenHourly(t *testing.T, b *redistest.Backend, id string, lead time.Duration) queue.Recurring {
	t.Helper()
	return queue.Recurring{ID: id, Every: time.Hour, Anchor: serverNow(t, b).Add(lead - time.Hour).Truncate(time.Millisecond)}
}

// fireAndArm claims everything due and arms what follows, as a poller does.
func fireAndArm(t *testing.T, q *queue.Queue) []queue.Fired {
	t.Helper()
	fired := claimAll(t, q)
	if _, err := q.Engine().ArmFired(context.Background(), fired); err != nil {
		t.Fatalf("ArmFired: %v", err)
	}
	return fired
}

func getRec(t *testing.T, q *queue.Queue, id string) queue.RecurringInfo {
	t.Helper()
	info, err := q.Recurring().Get(context.Background(), id)
	if err != nil {
		t.Fatalf("GetRecurring(%q): %v", id, err)
	}
	return info
}

func nominals(os []queue.Occurrence) []time.Time {
	var out []time.Time
	for _, o := range os {
		out = append(out, o.Nominal)
	}
	return out
}

func TestRecurringFixedInterval(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		c := newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		// The test wants an unbroken series, so it asks for CatchUpAll: on
		// a real clock a stall of the machine between a claim and its arm
		// can let the next occurrence come due, and CatchUpOnce would then
		// drop all but the latest of those due.
		info, created, err := q.Recurring().Put(ctx, queue.Recurring{ID: "tick", Every: 300 * time.Millisecond, Payload: []byte("p"), CatchUp: queue.CatchUpAll, CatchUpLimit: 50})
		if err != nil || !created {
			t.Fatalf("PutRecurring = %+v, %v, %v", info, created, err)
		}
		anchor := info.Anchor
		if len(info.Pending) != queue.DefaultAhead {
			t.Fatalf("pending %v, want %d armed ahead", info.Pending, queue.DefaultAhead)
		}
		for i, o := range info.Pending {
			want := anchor.Add(time.Duration(i+1) * 300 * time.Millisecond)
			if !o.Nominal.Equal(want) || o.ID != queue.OccurrenceID("tick", want) || !o.Due.Equal(want) {
				t.Fatalf("pending[%d] = %+v, want nominal %v", i, o, want)
			}
		}
		// Creating again is idempotent, even with another spec, and racing
		// creators create it once.
		var wg sync.WaitGroup
		var mu sync.Mutex
		creations := 0
		for i := range 6 {
			wg.Go(func() {
				_, created, err := q.Recurring().Put(ctx, queue.Recurring{ID: "race", Every: time.Duration(i+1) * time.Hour})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Error(err)
				}
				if created {
					creations++
				}
			})
		}
		wg.Wait()
		if race := getRec(t, q, "race"); creations != 1 || race.Version != 1 || race.Count != 2 {
			t.Fatalf("racing creators: %d created, version %d count %d; want 1, 1, 2", creations, race.Version, race.Count)
		}
		again, created, err := q.Recurring().Put(ctx, queue.Recurring{ID: "tick", Every: time.Hour})
		if err != nil || created || again.Every != 300*time.Millisecond || again.CatchUp != queue.CatchUpAll {
			t.Fatalf("second PutRecurring = %+v, %v, %v; want the existing schedule unchanged", again.Recurring, created, err)
		}

		seen := map[string]bool{}
		for range 5 {
			c.advance(300 * time.Millisecond)
			r := fireAndArmTimed(t, b, q)
			for _, f := range r.fired {
				sid, nominal, ok := queue.ParseOccurrenceID(f.ID)
				if !ok || sid != "tick" || seen[f.ID] || string(f.Payload) != "p" || f.FiredAt.Before(f.Due) || !f.Due.Equal(nominal) {
					t.Fatalf("fired %+v (schedule %q, nominal %v, seen before %v)", f, sid, nominal, seen[f.ID])
				}
				seen[f.ID] = true
			}
			// DefaultAhead armed again after the arm's now; on a real
			// clock also those that came due while the machine stalled.
			info := getRec(t, q, "tick")
			checkTopUp(t, r, info.Pending, queue.DefaultAhead)
			if b.Mini != nil && len(info.Pending) != queue.DefaultAhead {
				t.Fatalf("after a fire, pending = %v; want %d armed again", nominals(info.Pending), queue.DefaultAhead)
			}
		}
		if len(seen) < 4 {
			t.Fatalf("fired %d occurrences over 1.5s of a 300ms interval", len(seen))
		}
		// The fired occurrences form an unbroken series from the anchor.
		for k := 1; k <= len(seen); k++ {
			if id := queue.OccurrenceID("tick", anchor.Add(time.Duration(k)*300*time.Millisecond)); !seen[id] {
				t.Fatalf("occurrence %d (%s) missing from %v", k, id, seen)
			}
		}
	})
}

func TestRecurringCronWithSeconds(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		c := newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 500_000_000, time.UTC))
		// The put plans from the server's now at some instant after before
		// and before info.Now (read back after it): on a real server an
		// even second may pass in between, so each is judged against the
		// time it was computed from.
		before := serverNow(t, b)
		info, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "even", Spec: "*/2 * * * * *"})
		if err != nil {
			t.Fatal(err)
		}
		p := info.Pending
		if len(p) != 2 || p[1].Nominal.Sub(p[0].Nominal) != 2*time.Second {
			t.Fatalf("pending %v, want two occurrences 2s apart", nominals(p))
		}
		for _, o := range p {
			if o.Nominal.Unix()%2 != 0 || o.Nominal.Nanosecond() != 0 {
				t.Fatalf("occurrence %v is not an even second", o.Nominal)
			}
		}
		if !p[0].Nominal.After(before) || p[0].Nominal.Add(-2*time.Second).After(info.Now) {
			t.Fatalf("first occurrence %v is not the first even second after the put, in [%v, %v]", p[0].Nominal, before, info.Now)
		}
		if b.Mini != nil && !p[0].Nominal.Equal(time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC)) {
			t.Fatalf("first occurrence %v, want 00:00:02", p[0].Nominal)
		}
		next := info.Next
		if len(next) != 5 || !next[0].After(info.Now) || next[0].Add(-2*time.Second).After(info.Now) || next[4].Sub(next[0]) != 8*time.Second {
			t.Fatalf("Next = %v, want the next 5 even seconds after %v", next, info.Now)
		}
		if !next[0].Equal(p[0].Nominal) && !next[0].Equal(p[1].Nominal) {
			t.Fatalf("Next = %v does not go on from the pending %v", next, nominals(p))
		}
		c.reach(t, p[0].Due)
		fired := fireAndArm(t, q)
		if len(fired) != 1 || fired[0].ID != p[0].ID {
			t.Fatalf("fired %+v, want %s", fired, p[0].ID)
		}
		if got := getRec(t, q, "even").Pending; len(got) != 2 || !got[0].Nominal.Equal(p[1].Nominal) || got[1].Nominal.Sub(p[1].Nominal) != 2*time.Second {
			t.Fatalf("after the fire pending = %v", nominals(got))
		}
	})
}

// TestRecurringTimeZoneAndDST runs on miniredis only: it sets the server
// clock to the transitions, which a real server cannot do. The times are
// computed in Go (package schedule, whose tests cover both transitions), so
// Redis only stores them.
func TestRecurringTimeZoneAndDST(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	m, rdb := redistest.Mini(t)
	b := &redistest.Backend{Name: "mini", Client: rdb, Mini: m}
	ctx := context.Background()
	q := newQueue(t, b, queue.Options{})
	utc := func(s string) time.Time { tm, _ := time.Parse(time.RFC3339, s); return tm }
	for _, tc := range []struct {
		name, start string
		want        []string
	}{
		{"spring-forward", "2026-03-28T12:00:00Z", []string{"2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}},
		{"fall-back", "2026-10-24T12:00:00Z", []string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"}},
	} {
		c := newClock(b, utc(tc.start))
		id := "nightly-" + tc.name
		info, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: id, Spec: "30 2 * * *", Location: loc, Ahead: 1})
		if err != nil {
			t.Fatal(err)
		}
		var fired []time.Time
		for range len(tc.want) {
			c.advance(info.Pending[0].Due.Sub(c.now) + time.Minute)
			for _, f := range fireAndArm(t, q) {
				fired = append(fired, f.Due)
			}
			info = getRec(t, q, id)
		}
		// Run on past the transition day: nothing else fired.
		c.advance(time.Hour)
		for _, f := range fireAndArm(t, q) {
			fired = append(fired, f.Due)
		}
		if err := q.Recurring().Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if len(fired) != len(tc.want) {
			t.Fatalf("%s: fired at %v, want %v", tc.name, fired, tc.want)
		}
		for i, w := range tc.want {
			if !fired[i].Equal(utc(w)) {
				t.Fatalf("%s: fired at %v, want %v", tc.name, fired, tc.want)
			}
		}
	}
}

func TestRecurringCatchUpPolicies(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	const every = 200 * time.Millisecond
	for _, tc := range []struct {
		policy queue.CatchUp
		limit  int
		want   int // catch-up fires after the two armed ones
	}{
		{queue.CatchUpSkip, 0, 0},
		{queue.CatchUpOnce, 0, 1},
		{queue.CatchUpAll, 2, 2},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				q := newQueue(t, b, queue.Options{})
				c := newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				info, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "s", Every: every, CatchUp: tc.policy, CatchUpLimit: tc.limit})
				if err != nil {
					t.Fatal(err)
				}
				armedB := info.Pending[1].Nominal
				// Downtime: no worker for 1.1 s, so at least occurrences 3, 4
				// and 5 were never armed.
				c.advance(1100 * time.Millisecond)
				r := fireAndArmTimed(t, b, q)
				if len(r.fired) != 2 || !r.fired[1].Due.Equal(armedB) {
					t.Fatalf("the armed occurrences fired as %+v; want both, late", r.fired)
				}
				// The arm after them applied the policy at its now, in
				// [r.from, r.to]: the latest tc.want missed occurrences, then
				// DefaultAhead future ones, back to back. What is missed is
				// judged by those server times, not by a later read: on a
				// real server the clock runs on, and a stalled machine may
				// see the next occurrence come due before the next claim.
				p := getRec(t, q, "s").Pending
				if len(p) != tc.want+queue.DefaultAhead {
					t.Fatalf("%s armed %v after the downtime; want %d missed then %d future", tc.policy, nominals(p), tc.want, queue.DefaultAhead)
				}
				for i := 1; i < len(p); i++ {
					if p[i].Nominal.Sub(p[i-1].Nominal) != every {
						t.Fatalf("%s armed %v; want them back to back, the latest missed up to the first future one", tc.policy, nominals(p))
					}
				}
				next := p[tc.want].Nominal
				if !next.After(r.from) || next.Add(-every).After(r.to) {
					t.Fatalf("%s armed %v; want %v the first occurrence after the arm's now, in [%v, %v]", tc.policy, nominals(p), next, r.from, r.to)
				}
				if tc.policy == queue.CatchUpSkip && next.Sub(armedB) < 3*every {
					t.Fatalf("skip: next %v follows %v; the missed ones were not skipped", next, armedB)
				}
				// The missed ones are overdue, so the next claim fires them,
				// in due order; on a real server also those the clock has
				// reached since, which are no catch-up but on time.
				catchUp := fireAndArm(t, q)
				if len(catchUp) < tc.want || len(catchUp) > len(p) || (b.Mini != nil && len(catchUp) != tc.want) {
					t.Fatalf("%s fired %+v after the downtime, want the %d missed of %v", tc.policy, catchUp, tc.want, nominals(p))
				}
				for i, f := range catchUp {
					if f.ID != p[i].ID || f.FiredAt.Before(f.Due) {
						t.Fatalf("%s fired %+v after the downtime, want the %d missed of %v first", tc.policy, catchUp, tc.want, nominals(p))
					}
				}
			})
		})
	}
}

func TestRecurringPauseResume(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		info, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "hourly", Every: time.Hour, Payload: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		pending := info.Pending
		paused, err := q.Recurring().Pause(ctx, "hourly")
		if err != nil || paused.State != queue.RecurringPaused || len(paused.Pending) != 0 {
			t.Fatalf("PauseRecurring = %+v, %v", paused, err)
		}
		for _, o := range pending {
			if tm, err := q.Get(ctx, o.ID); err != nil || tm.State != queue.StateCancelled {
				t.Fatalf("occurrence %s after pause = %+v, %v; want cancelled", o.ID, tm, err)
			}
		}
		// Pausing it again changes nothing, not even the version.
		if again, err := q.Recurring().Pause(ctx, "hourly"); err != nil || again.Version != paused.Version || again.State != queue.RecurringPaused {
			t.Fatalf("second PauseRecurring = version %d state %s, %v; want version %d unchanged", again.Version, again.State, err, paused.Version)
		}
		// Neither the materializer nor the repair arms a paused schedule.
		if n, err := q.Engine().ArmFired(ctx, []queue.Fired{{ID: pending[0].ID}}); err != nil || n != 0 {
			t.Fatalf("ArmFired on a paused schedule armed %d, %v", n, err)
		}
		if n, _, err := q.Engine().RepairRecurring(ctx, 100, time.Millisecond); err != nil || n != 0 {
			t.Fatalf("RepairRecurring armed %d, %v", n, err)
		}
		resumed, err := q.Recurring().Resume(ctx, "hourly")
		if err != nil || resumed.State != queue.RecurringActive || len(resumed.Pending) != 2 {
			t.Fatalf("ResumeRecurring = %+v, %v", resumed, err)
		}
		// Resumed within the hour: the same occurrences are armed again,
		// under the same IDs.
		for i, o := range resumed.Pending {
			tm, err := q.Get(ctx, o.ID)
			if o.ID != pending[i].ID || err != nil || tm.State != queue.StateScheduled || string(tm.Payload) != "x" {
				t.Fatalf("occurrence %d after resume = %+v (%+v, %v), want %s scheduled", i, o, tm, err, pending[i].ID)
			}
		}
		if resumed.Count != 2 || resumed.Version != 3 {
			t.Fatalf("after resume Count %d Version %d, want 2 and 3", resumed.Count, resumed.Version)
		}
	})
}

func TestRecurringUpdate(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		info, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "u", Every: time.Hour, Payload: []byte("old")})
		if err != nil {
			t.Fatal(err)
		}
		h1, h2 := info.Pending[0], info.Pending[1]
		up, err := q.Recurring().Update(ctx, queue.Recurring{ID: "u", Every: 30 * time.Minute, Payload: []byte("new")})
		if err != nil {
			t.Fatal(err)
		}
		if up.Every != 30*time.Minute || !up.Anchor.Equal(info.Anchor) || up.Version != 2 {
			t.Fatalf("updated = %+v", up)
		}
		// New occurrences: +30m and +1h; +1h is the old one rewritten, +2h is cancelled.
		if len(up.Pending) != 2 || up.Pending[0].Nominal != info.Anchor.Add(30*time.Minute) || up.Pending[1].ID != h1.ID {
			t.Fatalf("pending after update %v", nominals(up.Pending))
		}
		for _, o := range up.Pending {
			tm, err := q.Get(ctx, o.ID)
			if err != nil || tm.State != queue.StateScheduled || string(tm.Payload) != "new" {
				t.Fatalf("occurrence %s = %+v, %v; want scheduled with the new payload", o.ID, tm, err)
			}
		}
		if tm, err := q.Get(ctx, h2.ID); err != nil || tm.State != queue.StateCancelled {
			t.Fatalf("dropped occurrence %s = %+v, %v; want cancelled", h2.ID, tm, err)
		}
		if _, err := q.Recurring().Update(ctx, queue.Recurring{ID: "nope", Every: time.Hour}); !errors.Is(err, queue.ErrRecurringNotFound) {
			t.Fatalf("update of a missing schedule: %v", err)
		}
		if err := q.Recurring().Delete(ctx, "u"); err != nil {
			t.Fatal(err)
		}
		if tm, _ := q.Get(ctx, h1.ID); tm.State != queue.StateCancelled {
			t.Fatalf("after delete occurrence %s is %s", h1.ID, tm.State)
		}
		if _, err := q.Recurring().Get(ctx, "u"); !errors.Is(err, queue.ErrRecurringNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
	})
}

func TestRecurringEndAndMaxCount(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		c := newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "three", Every: 100 * time.Millisecond, MaxCount: 3}); err != nil {
			t.Fatal(err)
		}
		now := getRec(t, q, "three").Now
		until, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "until", Every: 100 * time.Millisecond, End: now.Add(450 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		// The anchor is the put's own now, later than now by as long as the
		// machine took: 4 occurrences fit before End on miniredis, fewer
		// if a real server's clock ran on, and CatchUpOnce may drop one of
		// those when a stall lets two come due before an arm.
		fit := int(until.End.Sub(until.Anchor) / (100 * time.Millisecond))
		if fit != 4 && b.Mini != nil {
			t.Fatalf("%d occurrences fit before End (anchor %v, end %v), want 4", fit, until.Anchor, until.End)
		}
		one, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "one", Every: 100 * time.Millisecond, MaxCount: 1})
		if err != nil || len(one.Pending) != 1 || one.State != queue.RecurringEnded {
			t.Fatalf("MaxCount 1 armed %v (state %s, %v); want one occurrence and nothing more", nominals(one.Pending), one.State, err)
		}
		count := map[string]int{}
		for range 8 {
			c.advance(100 * time.Millisecond)
			for _, f := range fireAndArm(t, q) {
				sid, nominal, _ := queue.ParseOccurrenceID(f.ID)
				count[sid]++
				if sid == "until" && nominal.After(now.Add(450*time.Millisecond)) {
					t.Fatalf("occurrence %s is after End", f.ID)
				}
			}
		}
		if count["one"] != 1 || count["three"] != 3 || count["until"] < min(fit, 3) || count["until"] > fit {
			t.Fatalf("fired %v; want 3 of three and, of until, the %d before its End (one fewer after a catch-up)", count, fit)
		}
		for _, id := range []string{"three", "until"} {
			if info := getRec(t, q, id); info.State != queue.RecurringEnded || len(info.Pending) != 0 || len(info.Next) != 0 {
				t.Fatalf("%s = %+v, want ended with nothing pending", id, info)
			}
		}
	})
}

func TestRecurringRepairArmsAfterACrash(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		c := newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		r := soonThenHourly(t, b, "r", time.Second)
		put, _, err := q.Recurring().Put(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		first := put.Pending[0]
		if !first.Nominal.Equal(r.Anchor.Add(r.Every)) {
			t.Fatalf("first occurrence %v, want %v: the put came over 1s after reading the clock", first.Nominal, r.Anchor.Add(r.Every))
		}
		// A worker fires the first occurrence and dies before ArmFired.
		c.reach(t, first.Due)
		if fired := claimAll(t, q); len(fired) != 1 || fired[0].ID != first.ID {
			t.Fatalf("fired %+v, want %s", fired, first.ID)
		}
		info := getRec(t, q, "r")
		if len(info.Pending) != 1 {
			t.Fatalf("pending %v; the next occurrence must still be armed", nominals(info.Pending))
		}
		if n, _, err := q.Engine().RepairRecurring(ctx, 100, time.Hour); err != nil || n != 0 {
			t.Fatalf("repair within the grace armed %d, %v", n, err)
		}
		c.reach(t, first.Due.Add(100*time.Millisecond))
		n, more, err := q.Engine().RepairRecurring(ctx, 100, 50*time.Millisecond)
		if err != nil || n != 1 || more {
			t.Fatalf("repair armed %d (more %v), %v; want 1", n, more, err)
		}
		// Racing repairs and materializers arm nothing twice.
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				_, _, _ = q.Engine().RepairRecurring(ctx, 100, time.Millisecond)
				_, _ = q.Engine().ArmFired(ctx, []queue.Fired{{ID: info.Pending[0].ID}})
			})
		}
		wg.Wait()
		after := getRec(t, q, "r")
		if len(after.Pending) != 2 || after.Pending[0].ID != info.Pending[0].ID || after.Count != 3 {
			t.Fatalf("after repair pending %v count %d; want the armed one and its successor, 3 armed in all", nominals(after.Pending), after.Count)
		}
	})
}

// When claims are behind (the armed occurrences are overdue but still
// pending), the repair pass leaves the schedule alone: firing them will arm
// what follows. Repairing them would only add load to an overloaded Redis.
func TestRecurringRepairLeavesSchedulesThatClaimsAreBehindOn(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		c := newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		for _, id := range []string{"behind", "behind-too"} {
			if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: id, Every: 200 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		}
		c.advance(700 * time.Millisecond)
		before := serverNow(t, b).UnixMilli()
		// A full page of schedules that are only behind ends the pass.
		if n, more, err := q.Engine().RepairRecurring(ctx, 1, 50*time.Millisecond); err != nil || n != 0 || more {
			t.Fatalf("repair page of 1 behind schedule: armed %d, more %v, %v; want 0 and no more", n, more, err)
		}
		n, more, err := q.Engine().RepairRecurring(ctx, 100, 50*time.Millisecond)
		if err != nil || n != 0 || more {
			t.Fatalf("repair of a schedule whose occurrences are pending armed %d (more %v), %v; want 0", n, more, err)
		}
		score, err := b.Client.ZScore(ctx, q.Keys().Recurring(0)[1], "behind").Result()
		now := getRec(t, q, "behind").Now.UnixMilli()
		if err != nil || int64(score) < before || int64(score) > now {
			t.Fatalf("sched-due score %.0f (%v), want moved to the repair's now, in [%d, %d]", score, err, before, now)
		}
		// Once they fire without arming, the pass does top it up.
		claimAll(t, q)
		c.advance(100 * time.Millisecond)
		if n, _, err := q.Engine().RepairRecurring(ctx, 100, 50*time.Millisecond); err != nil || n == 0 {
			t.Fatalf("repair after the fires armed %d, %v", n, err)
		}
	})
}

func TestRecurringJitterIsSeeded(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		info, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "j", Spec: "@hourly", Jitter: 10 * time.Minute, Ahead: 5})
		if err != nil {
			t.Fatal(err)
		}
		spread := false
		for _, o := range info.Pending {
			d := o.Due.Sub(o.Nominal)
			if d < 0 || d >= 10*time.Minute || d != queue.JitterOf("j", o.Nominal, 10*time.Minute) {
				t.Fatalf("occurrence %+v delayed %v", o, d)
			}
			if tm, _ := q.Get(ctx, o.ID); !tm.Due.Equal(o.Due) {
				t.Fatalf("timer %s due %v, want %v", o.ID, tm.Due, o.Due)
			}
			spread = spread || d != info.Pending[0].Due.Sub(info.Pending[0].Nominal)
		}
		if !spread {
			t.Fatal("every occurrence got the same delay")
		}
	})
}

func TestRecurringBadInputWritesNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		for _, r := range []queue.Recurring{
			{ID: "x"},
			{ID: "x", Spec: "not cron"},
			{ID: "x", Spec: "@daily", Every: time.Hour},
			{ID: "x", Every: time.Hour, CatchUp: "sometimes"},
			{ID: "", Every: time.Hour},
		} {
			if _, _, err := q.Recurring().Put(ctx, r); err == nil {
				t.Fatalf("PutRecurring(%+v) succeeded", r)
			} else if !errors.Is(err, sched.ErrInvalidSchedule) && !errors.Is(err, queue.ErrInvalidID) {
				t.Fatalf("PutRecurring(%+v) = %v, want ErrInvalidSchedule or ErrInvalidID", r, err)
			}
		}
		if err := b.Client.Set(ctx, q.Keys().Recurring(0)[1], "junk", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "x", Every: time.Hour}); !errors.Is(err, queue.ErrWrongType) {
			t.Fatalf("PutRecurring over a foreign key = %v, want ErrWrongType", err)
		}
		if keys := nsKeys(t, b, q); len(keys) != 1 {
			t.Fatalf("keys after refused puts: %v", keys)
		}
	})
}

func TestOccurrenceIDRoundTrip(t *testing.T) {
	nominal := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	id := queue.OccurrenceID("team@example.com", nominal)
	if id != fmt.Sprintf("team@example.com@%d", nominal.UnixMilli()) {
		t.Fatalf("OccurrenceID = %q", id)
	}
	sid, n, ok := queue.ParseOccurrenceID(id)
	if !ok || sid != "team@example.com" || !n.Equal(nominal) {
		t.Fatalf("ParseOccurrenceID(%q) = %q, %v, %v", id, sid, n, ok)
	}
	for _, bad := range []string{"plain", "@123", "x@", "x@12a", "x@+12", "x@1234567890123456"} {
		if _, _, ok := queue.ParseOccurrenceID(bad); ok {
			t.Errorf("ParseOccurrenceID(%q) ok", bad)
		}
	}
}

// One unreadable schedule (a time zone this host lacks) does not stop the
// others of the batch from being armed, and the error names it.
func TestRecurringUnreadableScheduleDoesNotBlockOthers(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		c := newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		berlin, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Skip(err)
		}
		// Hourly, the first due in a second: exactly one occurrence fires
		// and one is armed, however long a loaded machine takes for the
		// steps between.
		good, _, err := q.Recurring().Put(ctx, soonThenHourly(t, b, "good", time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if got := good.Pending[0].Nominal; !got.Equal(good.Anchor.Add(time.Hour)) {
			t.Fatalf("first occurrence %v, want %v: the put came over 1s after reading the clock", got, good.Anchor.Add(time.Hour))
		}
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "bad", Spec: "@hourly", Location: berlin}); err != nil {
			t.Fatal(err)
		}
		key := q.Keys().Recurring(0)[0]
		rec, err := b.Client.HGet(ctx, key, "bad").Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Client.HSet(ctx, key, "bad", strings.Replace(rec, "Europe/Berlin", "Mars/Olympus", 1)).Err(); err != nil {
			t.Fatal(err)
		}
		c.reach(t, good.Pending[0].Due)
		fired := claimAll(t, q)
		if len(fired) != 1 || fired[0].ID != good.Pending[0].ID {
			t.Fatalf("fired %+v, want %s", fired, good.Pending[0].ID)
		}
		n, err := q.Engine().ArmFired(ctx, append(fired, queue.Fired{ID: "bad@1767229200000"}))
		if n != 1 || err == nil || !strings.Contains(err.Error(), "Mars/Olympus") {
			t.Fatalf("ArmFired = %d, %v; want the good schedule armed and an error naming the bad zone", n, err)
		}
		if p := getRec(t, q, "good").Pending; len(p) != 2 {
			t.Fatalf("good pending %v", nominals(p))
		}
		if _, err := q.Recurring().Get(ctx, "bad"); err == nil || !strings.Contains(err.Error(), "Mars/Olympus") {
			t.Fatalf("GetRecurring(bad) = %v", err)
		}
	})
}

func TestRestoreRecurringKeepsCountAndPending(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		src := newQueue(t, b, queue.Options{})
		newClock(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		in, _, err := src.Recurring().Put(ctx, queue.Recurring{ID: "r", Every: time.Hour, MaxCount: 6})
		if err != nil {
			t.Fatal(err)
		}
		in.Count = 5 // as if 3 had fired before the export
		dst := newQueue(t, b, queue.Options{})
		if created, err := dst.Recurring().Restore(ctx, in); err != nil || !created {
			t.Fatalf("RestoreRecurring = %v, %v", created, err)
		}
		got := getRec(t, dst, "r")
		if got.Count != 5 || len(got.Pending) != 2 || got.Pending[1].ID != in.Pending[1].ID || !got.Last.Equal(in.Last) {
			t.Fatalf("restored %+v, want count 5 and the same pending occurrences and last", got)
		}
		// MaxCount 6 with 5 armed (2 of them pending): 3 occurrences to come.
		if len(got.Next) != 3 {
			t.Fatalf("next %v, want the 2 pending and 1 more under MaxCount", got.Next)
		}
		if created, err := dst.Recurring().Restore(ctx, in); err != nil || created {
			t.Fatalf("second restore = %v, %v; want left as it is", created, err)
		}
	})
}

// The schedules live in their own two keys, whatever number of keys the
// timer scripts take before them.
func TestRecurringKeysAreTheirOwn(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "k", Every: time.Hour}); err != nil {
			t.Fatal(err)
		}
		prefix := "timerq:{" + q.Namespace() + "}:"
		if got := q.Keys().Recurring(0); len(got) != 2 || got[0] != prefix+"schedules" || got[1] != prefix+"sched-due" {
			t.Fatalf("RecurringKeys = %v", got)
		}
		if n, err := b.Client.HLen(ctx, prefix+"schedules").Result(); err != nil || n != 1 {
			t.Fatalf("schedules hash has %d fields, %v", n, err)
		}
		if n, err := b.Client.ZCard(ctx, prefix+"sched-due").Result(); err != nil || n != 1 {
			t.Fatalf("sched-due has %d members, %v", n, err)
		}
		for _, k := range q.Keys().Shard(0) {
			if typ, _ := b.Client.Type(ctx, k).Result(); typ == "hash" {
				if ok, _ := b.Client.HExists(ctx, k, "k").Result(); ok {
					t.Fatalf("the schedule was written into %s", k)
				}
			}
		}
	})
}
