package queue_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestOwnerAndLabelsAreKept: a timer's owner, labels and deadline come
// back from Schedule, a replayed Schedule, Get, List (with its filters)
// and the fire stream entry, and a timer without them has none.
func TestOwnerAndLabelsAreKept(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := serverNow(t, b).Add(-time.Second).Truncate(time.Millisecond)
		labels := map[string]string{"tenant": "acme", "kind": "sla"}
		nt := queue.NewTimer{ID: "o-1", Due: due, Payload: []byte("p"), Owner: "wf-1", Labels: labels, FireWithin: time.Minute}
		res, err := q.ScheduleBatch(ctx, []queue.NewTimer{nt, {ID: "plain", Due: due}, {ID: "o-2", Due: due, Owner: "wf-2"}})
		if err != nil {
			t.Fatal(err)
		}
		want := func(tm queue.Timer, where string) {
			t.Helper()
			if tm.Owner != "wf-1" || tm.Epoch != 0 || !maps.Equal(tm.Labels, labels) || !tm.Deadline.Equal(due.Add(time.Minute)) {
				t.Fatalf("%s: owner %q epoch %d labels %v deadline %v; want wf-1, 0, %v, %v", where, tm.Owner, tm.Epoch, tm.Labels, tm.Deadline, labels, due.Add(time.Minute))
			}
		}
		want(res[0].Timer, "Schedule")
		if res[1].Timer.Owner != "" || res[1].Timer.Labels != nil || !res[1].Timer.Deadline.IsZero() {
			t.Fatalf("plain timer has meta: %+v", res[1].Timer)
		}
		again, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "o-1", Due: due}})
		if err != nil || again[0].Created {
			t.Fatalf("replay: %v %+v", err, again)
		}
		want(again[0].Timer, "replayed Schedule")
		got, err := q.Get(ctx, "o-1")
		if err != nil {
			t.Fatal(err)
		}
		want(got, "Get")

		for _, c := range []struct {
			o   queue.ListOptions
			ids string
		}{
			{queue.ListOptions{Owner: "wf-1"}, "[o-1]"},
			{queue.ListOptions{Labels: map[string]string{"tenant": "acme"}}, "[o-1]"},
			{queue.ListOptions{Labels: map[string]string{"tenant": "other"}}, "[]"},
			{queue.ListOptions{Owner: "wf-2"}, "[o-2]"},
			{queue.ListOptions{}, "[o-1 o-2 plain]"},
		} {
			page, err := q.List(ctx, c.o)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, tm := range page.Timers {
				ids = append(ids, tm.ID)
				if tm.ID == "o-1" {
					want(tm, "List")
				}
			}
			if fmt.Sprint(ids) != c.ids && !(c.ids == "[]" && ids == nil) {
				t.Fatalf("List %+v: %v, want %s", c.o, ids, c.ids)
			}
		}

		claimAll(t, q)
		var found bool
		for _, m := range fireEntries(t, b, q) {
			if m.Values["id"] == "o-1" {
				found = true
				if m.Values["meta"] == nil {
					t.Fatalf("fire entry of o-1 has no meta: %v", m.Values)
				}
			}
			if m.Values["id"] == "plain" && m.Values["meta"] != nil {
				t.Fatalf("fire entry of a plain timer has meta: %v", m.Values)
			}
		}
		if !found {
			t.Fatal("o-1 did not fire")
		}
		fired, err := q.Get(ctx, "o-1")
		if err != nil || fired.State != queue.StateFired {
			t.Fatalf("Get after fire: %v %+v", err, fired)
		}
		want(fired, "Get of the fired timer")
		if b.Shards <= 1 {
			mustBeConsistent(t, b.Client, q, "owned timers fired")
		}
	})
}

// TestOwnerAndLabelsAreValidated: bad owners, labels and deadlines are
// refused before anything is written, naming the field.
func TestOwnerAndLabelsAreValidated(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := time.Now().Add(time.Hour)
		many := map[string]string{}
		for i := range queue.MaxLabels + 1 {
			many["k"+strconv.Itoa(i)] = "v"
		}
		for name, nt := range map[string]queue.NewTimer{
			"control character in owner": {Owner: "a\x1fb"},
			"owner too long":             {Owner: string(make([]byte, queue.MaxOwnerBytes+1))},
			"bad label key":              {Labels: map[string]string{"a b": "v"}},
			"control in label value":     {Labels: map[string]string{"k": "v\x00"}},
			"too many labels":            {Labels: many},
			"epoch without owner":        {Epoch: 3},
			"deadline before due":        {FireBy: due.Add(-time.Second)},
			"both deadlines":             {FireBy: due.Add(time.Hour), FireWithin: time.Minute},
		} {
			nt.ID, nt.Due = "bad", due
			_, err := q.ScheduleBatch(ctx, []queue.NewTimer{nt})
			var fe *queue.FieldError
			if !errors.Is(err, queue.ErrInvalidOptions) || !errors.As(err, &fe) {
				t.Errorf("%s: %v, want a field error wrapping ErrInvalidOptions", name, err)
			}
		}
		if _, err := q.Get(ctx, "bad"); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("a refused timer was written: %v", err)
		}
	})
}

// TestBumpEpochFences: each timer records its owner's epoch; a fire
// carries it, so an executor that bumped the epoch refuses the fires of
// timers scheduled before; scheduling under a stale epoch is refused
// whole; bumping with CancelOlder cancels the older timers only.
func TestBumpEpochFences(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		past := serverNow(t, b).Add(-time.Second)
		later := past.Add(time.Hour)
		if e, err := q.Epoch(ctx, "wf"); err != nil || e != 0 {
			t.Fatalf("Epoch of a new owner: %d %v", e, err)
		}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{
			{ID: "old-due", Due: past, Owner: "wf"}, {ID: "old-later", Due: later, Owner: "wf"},
			{ID: "other", Due: later, Owner: "wf-other"},
		}); err != nil {
			t.Fatal(err)
		}
		bumped, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{})
		if err != nil || bumped.Epoch != 1 {
			t.Fatalf("BumpEpoch: %+v %v", bumped, err)
		}
		if e, err := q.Epoch(ctx, "wf"); err != nil || e != 1 {
			t.Fatalf("Epoch after the bump: %d %v", e, err)
		}
		// An executor at an epoch the owner is not at is refused, and
		// its batch writes nothing (all or nothing per shard: both IDs
		// are in one shard's part, as the stale one alone is).
		_, err = q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "zombie", Due: past, Owner: "wf", Epoch: 7}, {ID: "zombie", Due: past}})
		if !errors.Is(err, queue.ErrStaleEpoch) {
			t.Fatalf("schedule under a stale epoch: %v, want ErrStaleEpoch", err)
		}
		if _, err := q.Get(ctx, "zombie"); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("a refused batch wrote a timer: %v", err)
		}
		res, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "new-due", Due: past, Owner: "wf", Epoch: bumped.Epoch}})
		if err != nil || res[0].Timer.Epoch != 1 {
			t.Fatalf("schedule under the current epoch: %v %+v", err, res)
		}

		// The executor at epoch 1 reads the fires and refuses the stale one.
		claimAll(t, q)
		accepted, refused := map[string]bool{}, map[string]bool{}
		for _, m := range fireEntries(t, b, q) {
			ev, err := queue.ParseFireEntry(m)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Epoch < bumped.Epoch {
				refused[ev.ID] = true
			} else {
				accepted[ev.ID] = true
			}
		}
		if !refused["old-due"] || !accepted["new-due"] || len(accepted)+len(refused) != 2 {
			t.Fatalf("accepted %v, refused %v; want new-due accepted, old-due refused", accepted, refused)
		}

		// A waiter reads the epoch with the fire.
		for id, want := range map[string]uint64{"old-due": 0, "new-due": 1} {
			tm, err := q.WaitFired(ctx, id)
			if err != nil || tm.State != queue.StateFired || tm.Epoch != want || tm.Owner != "wf" {
				t.Fatalf("WaitFired %s: %+v %v, want fired at epoch %d", id, tm, err, want)
			}
		}

		again, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{CancelOlder: true})
		if err != nil || again.Epoch != 2 || again.Cancel == nil {
			t.Fatalf("BumpEpoch CancelOlder: %+v %v", again, err)
		}
		if c := again.Cancel.Counts; c.Cancelled != 1 {
			t.Fatalf("CancelOlder counts %+v, want 1 cancelled (old-later)", c)
		}
		// The executor at epoch 1 lost the owner: it can no longer schedule.
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "late", Due: later, Owner: "wf", Epoch: 1}}); !errors.Is(err, queue.ErrStaleEpoch) {
			t.Fatalf("schedule at epoch 1 after the bump to 2: %v", err)
		}
		for id, st := range map[string]queue.State{"old-later": queue.StateCancelled, "other": queue.StateScheduled,
			"old-due": queue.StateFired, "new-due": queue.StateFired} {
			if tm, err := q.Get(ctx, id); err != nil || tm.State != st {
				t.Fatalf("%s: %v %v, want %s", id, tm.State, err, st)
			}
		}
		if b.Shards <= 1 {
			mustBeConsistent(t, b.Client, q, "a bump that cancelled older timers")
		}
	})
}

// TestNextWake: an owner's next wake is the earliest due time among its
// scheduled timers, on every shard; settled timers do not count.
func TestNextWake(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if w, err := q.NextWake(ctx, "wf"); err != nil || w.Scheduled != 0 || !w.Next.IsZero() {
			t.Fatalf("NextWake of no timers: %+v %v", w, err)
		}
		now := serverNow(t, b).Truncate(time.Millisecond)
		var batch []queue.NewTimer
		for i := range 20 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("w-%d", i), Due: now.Add(time.Duration(i+1) * time.Hour), Owner: "wf"})
		}
		batch = append(batch, queue.NewTimer{ID: "early-other", Due: now.Add(time.Minute), Owner: "wf-other"},
			queue.NewTimer{ID: "w-past", Due: now.Add(-time.Second), Owner: "wf"})
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		claimAll(t, q) // w-past fires and no longer counts
		if _, err := q.Cancel(ctx, "w-0"); err != nil {
			t.Fatal(err)
		}
		w, err := q.NextWake(ctx, "wf")
		if err != nil || w.Scheduled != 19 || !w.Next.Equal(now.Add(2*time.Hour)) {
			t.Fatalf("NextWake: %+v %v, want 19 scheduled, next %v", w, err, now.Add(2*time.Hour))
		}
	})
}

// TestNextWakeOfManyTimers: an owner with more timers on a shard than
// Lua's unpack takes (about 8,000) still has its next wake. owner_wake.lua
// passed them all to one ZMSCORE, and NextWake failed: "too many results
// to unpack" on Redis, "registry overflow" on miniredis.
func TestNextWakeOfManyTimers(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		first := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		for j := range 9 {
			batch := make([]queue.NewTimer, 0, 1000)
			for i := range 1000 {
				n := j*1000 + i
				batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("w-%d", n), Due: first.Add(time.Duration(n) * time.Second), Owner: "wf"})
			}
			if _, err := q.ScheduleBatch(ctx, batch); err != nil {
				t.Fatal(err)
			}
		}
		w, err := q.NextWake(ctx, "wf")
		if err != nil || w.Scheduled != 9000 || !w.Next.Equal(first) {
			t.Fatalf("NextWake: %+v %v, want 9000 scheduled, next %v", w, err, first)
		}
	})
}

// TestArmManyOwnedOccurrences: one arming of owned schedules that creates
// more occurrences than Lua's unpack takes (about 8,000 values: two per
// occurrence) arms them all. includes/meta.lua wrote every occurrence's
// meta in one HSET through unpack, and recur_arm.lua batches the
// occurrences of every schedule it tops up, so ArmFired (and the repair
// pass) failed on every call and the schedules stopped.
func TestArmManyOwnedOccurrences(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		const schedules, ahead = 45, 100
		var fired []queue.Fired
		for i := range schedules {
			id := fmt.Sprintf("s-%d", i)
			if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: id, Every: time.Hour, Ahead: ahead, Owner: "wf"}); err != nil {
				t.Fatal(err)
			}
			fired = append(fired, queue.Fired{ID: queue.OccurrenceID(id, time.UnixMilli(1))})
		}
		// With its occurrences cancelled, each schedule needs ahead new
		// ones: one ArmFired arms them all in one script.
		job, err := q.CancelMatching(ctx, queue.CancelFilter{Owner: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		// A slow machine may hand the job to the workers after 5 s: finish
		// it here as a worker would.
		if job.State != queue.CancelJobDone {
			if _, err := q.Engine().RunCancelJobs(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		if w, err := q.NextWake(ctx, "wf"); err != nil || w.Scheduled != 0 {
			t.Fatalf("NextWake after the cancel: %+v %v, want none scheduled", w, err)
		}
		if n, err := q.Engine().ArmFired(ctx, fired); err != nil || n != schedules*ahead {
			t.Fatalf("ArmFired = %d, %v; want %d armed", n, err, schedules*ahead)
		}
		if w, err := q.NextWake(ctx, "wf"); err != nil || w.Scheduled != schedules*ahead {
			t.Fatalf("NextWake after ArmFired: %+v %v, want %d scheduled", w, err, schedules*ahead)
		}
	})
}

// TestCancelMatchingOwnerAndLabels: a bulk cancel by owner, by labels, and
// by both with an ID prefix cancels exactly the timers selected.
func TestCancelMatchingOwnerAndLabels(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := time.Now().Add(time.Hour)
		var batch []queue.NewTimer
		for i := range 300 {
			owner := []string{"a", "b", "a=x"}[i%3]
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("t%d-%d", i%2, i), Due: due, Owner: owner,
				Labels: map[string]string{"a": "x", "parity": strconv.Itoa(i % 2)}})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		run := func(f queue.CancelFilter) queue.CancelCounts {
			t.Helper()
			job, err := q.CancelMatching(ctx, f)
			if err != nil || job.State != queue.CancelJobDone {
				t.Fatalf("CancelMatching %+v: %+v %v", f, job, err)
			}
			if !maps.Equal(job.Filter.Labels, f.Labels) || job.Filter.Owner != f.Owner {
				t.Fatalf("job filter %+v, want %+v", job.Filter, f)
			}
			return job.Counts
		}
		// Owner a, IDs t0-: i%3 == 0 and i%2 == 0: 50 timers.
		if c := run(queue.CancelFilter{Owner: "a", IDPrefix: "t0-"}); c.Cancelled != 50 || c.Matched() != 50 {
			t.Fatalf("owner a, prefix t0-: %+v", c)
		}
		// Owner b, parity 1: i%3 == 1, i odd: 50.
		if c := run(queue.CancelFilter{Owner: "b", Labels: map[string]string{"parity": "1"}}); c.Cancelled != 50 {
			t.Fatalf("owner b, parity 1: %+v", c)
		}
		// The owner "a=x" is not the label a=x: by label, every timer
		// carries it; 200 left, 100 already cancelled.
		if c := run(queue.CancelFilter{Labels: map[string]string{"a": "x"}}); c.Cancelled != 200 || c.AlreadyCancelled != 100 {
			t.Fatalf("label a=x: %+v", c)
		}
	})
}

// TestRecurringOccurrencesCarryOwner: a schedule's owner and labels go to
// each occurrence it arms (by the put and by the materializer after a
// fire), each with its owner's epoch at arming, and a bulk cancel by owner
// selects them.
func TestRecurringOccurrencesCarryOwner(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		labels := map[string]string{"team": "billing"}
		info, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "tick", Every: 200 * time.Millisecond, Owner: "wf", Labels: labels, Ahead: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := q.Recurring().Get(ctx, "tick"); err != nil || got.Owner != "wf" || !maps.Equal(got.Labels, labels) {
			t.Fatalf("schedule read back: %+v %v", got.Recurring, err)
		}
		first := info.Pending[0].ID
		tm, err := q.Get(ctx, first)
		if err != nil || tm.Owner != "wf" || tm.Epoch != 0 || !maps.Equal(tm.Labels, labels) {
			t.Fatalf("occurrence %s armed by the put: %+v %v", first, tm, err)
		}
		if _, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
			t.Fatal(err)
		}
		// Fire occurrences until one armed after the bump exists.
		var later queue.Timer
		redistest.Eventually(t, 10*time.Second, "an occurrence armed after the bump", func() bool {
			fireAndArm(t, q)
			cur, err := q.Recurring().Get(ctx, "tick")
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range cur.Pending {
				if tm, err := q.Get(ctx, o.ID); err == nil && tm.Epoch == 1 {
					later = tm
					return true
				}
			}
			return false
		})
		if later.Owner != "wf" || !maps.Equal(later.Labels, labels) {
			t.Fatalf("occurrence armed after a fire: %+v", later)
		}
		// An owner cannot change (its occurrences' index entries would
		// stay under the old one); labels can.
		if _, err := q.Recurring().Update(ctx, queue.Recurring{ID: "tick", Every: 200 * time.Millisecond, Owner: "other", Ahead: 2}); !errors.Is(err, queue.ErrInvalidOptions) {
			t.Fatalf("Update to another owner: %v, want ErrInvalidOptions", err)
		}
		if _, err := q.Recurring().Pause(ctx, "tick"); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Recurring().Resume(ctx, "tick"); err != nil {
			t.Fatal(err)
		}
		job, err := q.CancelMatching(ctx, queue.CancelFilter{Owner: "wf", Labels: labels})
		if err != nil || job.Counts.Cancelled < 1 {
			t.Fatalf("bulk cancel of the schedule's occurrences: %+v %v", job, err)
		}
	})
}

// TestDebounceWindowCarriesOwner: the call that opens a debounce window
// gives its timer an owner and labels; a push leaves them, and its result
// shows them.
func TestDebounceWindowCarriesOwner(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		labels := map[string]string{"kind": "digest"}
		opts := queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Owner: "wf", Labels: labels}
		res, err := q.Debounce(ctx, "mail", opts)
		if err != nil || res.Outcome != queue.DebounceCreated || res.Timer.Owner != "wf" || !maps.Equal(res.Timer.Labels, labels) {
			t.Fatalf("opening call: %+v %v", res, err)
		}
		// A push (with or without an owner of its own) answers with the
		// window's timer as it is: the opening call's owner and labels.
		for _, o := range []queue.DebounceOptions{opts, {Delay: time.Hour, MaxWait: 2 * time.Hour}} {
			pushed, err := q.Debounce(ctx, "mail", o)
			if err != nil || pushed.Outcome != queue.DebouncePushed || pushed.Timer.ID != res.Timer.ID ||
				pushed.Timer.Owner != "wf" || !maps.Equal(pushed.Timer.Labels, labels) {
				t.Fatalf("push (owner %q): %+v %v, want the window's timer with owner wf and labels %v", o.Owner, pushed, err, labels)
			}
		}
		tm, err := q.Get(ctx, res.Timer.ID)
		if err != nil || tm.Owner != "wf" || !maps.Equal(tm.Labels, labels) {
			t.Fatalf("window timer after a push: %+v %v", tm, err)
		}
		if w, err := q.NextWake(ctx, "wf"); err != nil || w.Scheduled != 1 {
			t.Fatalf("NextWake: %+v %v", w, err)
		}
	})
}

// TestDeadLettersCarryMeta: a dead letter carries its fire's owner, epoch,
// labels and deadline, as the event Lease handed out did, whether Release
// dead-lettered it or its lease ran out past MaxAttempts; one of a timer
// without them has none.
func TestDeadLettersCarryMeta(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		freezeMini(b)
		q := newQueue(t, b, queue.Options{})
		// Epoch 2, not the zero value an unparsed field would leave.
		for range 2 {
			if _, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		due := serverNow(t, b).Add(-time.Second).Truncate(time.Millisecond)
		labels := map[string]string{"tenant": "acme", "kind": "sla"}
		meta := func(id string) queue.NewTimer {
			return queue.NewTimer{ID: id, Due: due, Payload: []byte(id), Owner: "wf", Labels: labels, FireWithin: time.Hour}
		}
		scheduleAndFire(t, q, meta("released"), meta("expired"), queue.NewTimer{ID: "plain", Due: due, Payload: []byte("plain")})
		o := queue.LeaseOptions{Lease: 200 * time.Millisecond, MaxAttempts: 1}
		ds := lease(t, q, "g", "c", o)
		if got := fmt.Sprint(timerIDs(ds)); got != "[expired plain released]" {
			t.Fatalf("leased %s, want [expired plain released]", got)
		}
		var expires time.Time
		for _, d := range ds {
			if d.Event.ID == "expired" {
				expires = d.LeaseExpires
				continue
			}
			r, err := q.Release(ctx, "g", d.DeliveryID, queue.ReleaseOptions{Error: "no", DeadLetter: true}, o)
			if err != nil || r.DeadLetterID == "" {
				t.Fatalf("Release(%s, DeadLetter) = %+v, %v; want a dead letter", d.Event.ID, r, err)
			}
		}
		passLease(t, b, expires)
		if again := lease(t, q, "g", "c2", o); len(again) != 0 {
			t.Fatalf("leased %v; expired is past MaxAttempts", timerIDs(again))
		}
		dead := deadLetters(t, q)
		if len(dead) != 3 {
			t.Fatalf("dead letters %v, want released, expired and plain", dead)
		}
		for _, id := range []string{"released", "expired"} {
			ev := dead[id].Event
			if ev.Owner != "wf" || ev.Epoch != 2 || !maps.Equal(ev.Labels, labels) || !ev.Deadline.Equal(due.Add(time.Hour)) {
				t.Errorf("dead letter %s: owner %q epoch %d labels %v deadline %v; want wf, 2, %v, %v",
					id, ev.Owner, ev.Epoch, ev.Labels, ev.Deadline, labels, due.Add(time.Hour))
			}
		}
		if ev := dead["plain"].Event; ev.Owner != "" || ev.Epoch != 0 || ev.Labels != nil || !ev.Deadline.IsZero() {
			t.Errorf("dead letter of a plain timer has meta: %+v", ev)
		}
	})
}
