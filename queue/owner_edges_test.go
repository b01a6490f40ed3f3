package queue_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// Tests of the owners' edges: what the HTTP API, timerctl and export
// found of the library's owners, labels and epochs.

// TestCancelMatchingEpochBelowNeedsOwner: an epoch bound selects an
// owner's timers by the epoch they were scheduled under. Without an owner
// or labels a bulk cancel scans the records, which know no epoch, so the
// bound would be ignored and every timer of the prefix cancelled: such a
// filter is refused, and cancels nothing.
func TestCancelMatchingEpochBelowNeedsOwner(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := time.Now().Add(time.Hour)
		if _, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "p-new", Due: due, Owner: "wf", Epoch: 1}, {ID: "p-plain", Due: due}}); err != nil {
			t.Fatal(err)
		}
		job, err := q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: "p-", EpochBelow: 1})
		if !errors.Is(err, queue.ErrInvalidFilter) {
			t.Errorf("CancelMatching by prefix and epoch alone: %+v %v, want ErrInvalidFilter", job, err)
		}
		for _, id := range []string{"p-new", "p-plain"} {
			if tm, err := q.Get(ctx, id); err != nil || tm.State != queue.StateScheduled {
				t.Errorf("%s: %v %v, want it left scheduled", id, tm.State, err)
			}
		}
	})
}

// TestRestoreRaisesTheOwnersEpoch: restored timers of an owner raise its
// epoch to at least theirs, on whichever shard they land: Epoch reads it,
// BumpEpoch goes past it, and a timer scheduled under the bumped epoch is
// taken on every shard.
func TestRestoreRaisesTheOwnersEpoch(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b).Truncate(time.Millisecond)
		// One timer of the owner, at epoch 5, on some shard.
		in := queue.Timer{ID: "restored", State: queue.StateScheduled, Due: now.Add(time.Hour), CreatedAt: now, Owner: "wf", Epoch: 5}
		if res, err := q.Restore(ctx, []queue.Timer{in}); err != nil || !res[0].Created {
			t.Fatalf("Restore: %+v %v", res, err)
		}
		if e, err := q.Epoch(ctx, "wf"); err != nil || e < 5 {
			t.Errorf("Epoch after restoring a timer of epoch 5: %d %v, want at least 5", e, err)
		}
		bumped, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{})
		if err != nil || bumped.Epoch <= 5 {
			t.Fatalf("BumpEpoch after the restore: %+v %v, want past 5", bumped, err)
		}
		var batch []queue.NewTimer
		for i := range 40 {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("new-", i), Due: now.Add(time.Hour), Owner: "wf", Epoch: bumped.Epoch})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatalf("schedule under the bumped epoch %d: %v", bumped.Epoch, err)
		}
	})
}

// TestStaleEpochIsNotAnUnknownOutcome: a create refused for a stale epoch
// was refused by the script before any write, so its error says so and
// does not also say "outcome unknown: retry with the same ID", which a
// retry under the same epoch would only repeat.
func TestStaleEpochIsNotAnUnknownOutcome(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if _, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "z", Due: time.Now().Add(time.Hour), Owner: "wf", Epoch: 3}})
		if !errors.Is(err, queue.ErrStaleEpoch) || errors.Is(err, queue.ErrOutcomeUnknown) {
			t.Fatalf("schedule under a stale epoch: %v, want ErrStaleEpoch and not ErrOutcomeUnknown", err)
		}
	})
}

// TestRecurringUpdateDropsOldLabels: an update without labels rewrites the
// schedule's pending occurrences in place, and they shed the old labels
// with it, so that a bulk cancel by those labels no longer selects them.
// The script used to only ever add meta, so both occurrences kept
// team=billing.
func TestRecurringUpdateDropsOldLabels(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		r := queue.Recurring{ID: "tick", Every: time.Hour, Labels: map[string]string{"team": "billing"}, Ahead: 2}
		info, _, err := q.Recurring().Put(ctx, r)
		if err != nil || len(info.Pending) != 2 {
			t.Fatalf("Put: %+v %v, want 2 pending", info.Pending, err)
		}
		r.Labels = nil
		after, err := q.Recurring().Update(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		// The update keeps the anchor, so it rewrites the same occurrences.
		if len(after.Pending) != 2 || after.Pending[0].ID != info.Pending[0].ID || after.Pending[1].ID != info.Pending[1].ID {
			t.Fatalf("pending after the update: %+v, want %+v rewritten", after.Pending, info.Pending)
		}
		for _, o := range after.Pending {
			tm, err := q.Get(ctx, o.ID)
			if err != nil || tm.State != queue.StateScheduled || tm.Labels != nil || tm.Owner != "" {
				t.Errorf("%s after the update: %v labels %v owner %q, %v; want scheduled without labels", o.ID, tm.State, tm.Labels, tm.Owner, err)
			}
		}
		job, err := q.CancelMatching(ctx, queue.CancelFilter{Labels: map[string]string{"team": "billing"}})
		if err != nil || job.Counts.Cancelled != 0 {
			t.Errorf("CancelMatching team=billing after the labels went: %+v %v, want nothing cancelled", job.Counts, err)
		}
	})
}

// TestRecurringRecreateUnderAnotherOwner: a schedule deleted and created
// again with the same anchor revives its cancelled occurrences, same IDs,
// and they leave the old owner entirely: its index no longer counts them
// (NextWake), and a new schedule without an owner gives them none. The
// script used to add the new owner's entry beside the old one's, which no
// purge ever removed, and to leave an owner-less revival the old owner.
func TestRecurringRecreateUnderAnotherOwner(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		anchor := serverNow(t, b).Add(-time.Minute).Truncate(time.Millisecond)
		put := func(owner string, labels map[string]string) []queue.Occurrence {
			t.Helper()
			info, created, err := q.Recurring().Put(ctx, queue.Recurring{ID: "tick", Every: time.Hour, Anchor: anchor, Owner: owner, Labels: labels, Ahead: 2})
			if err != nil || !created || len(info.Pending) != 2 {
				t.Fatalf("Put owner %q: %+v %v %v, want created with 2 pending", owner, info.Pending, created, err)
			}
			return info.Pending
		}
		wake := func(owner string) int64 {
			t.Helper()
			w, err := q.NextWake(ctx, owner)
			if err != nil {
				t.Fatal(err)
			}
			return w.Scheduled
		}
		first := put("wf-a", map[string]string{"team": "billing"})
		if n := wake("wf-a"); n != 2 {
			t.Fatalf("NextWake(wf-a) after the put: %d scheduled, want 2", n)
		}
		for _, step := range []struct {
			owner  string
			labels map[string]string
		}{{"wf-b", nil}, {"", nil}, {"wf-a", map[string]string{"team": "billing"}}} {
			if err := q.Recurring().Delete(ctx, "tick"); err != nil {
				t.Fatal(err)
			}
			revived := put(step.owner, step.labels)
			if revived[0].ID != first[0].ID || revived[1].ID != first[1].ID {
				t.Fatalf("owner %q: pending %+v, want %+v revived", step.owner, revived, first)
			}
			for _, o := range revived {
				tm, err := q.Get(ctx, o.ID)
				if err != nil || tm.State != queue.StateScheduled || tm.Owner != step.owner || len(tm.Labels) != len(step.labels) {
					t.Errorf("owner %q: %s is %v owner %q labels %v, %v; want scheduled, owner %q labels %v",
						step.owner, o.ID, tm.State, tm.Owner, tm.Labels, err, step.owner, step.labels)
				}
			}
			for _, owner := range []string{"wf-a", "wf-b"} {
				want := int64(0)
				if owner == step.owner {
					want = 2
				}
				if n := wake(owner); n != want {
					t.Errorf("schedule owned by %q: NextWake(%s) = %d scheduled, want %d", step.owner, owner, n, want)
				}
			}
		}
	})
}

// TestRestoreResultsCarryTheStoredMeta: Restore's result for an ID that
// exists (Created false) is the timer as it is, with the owner, labels,
// epoch and deadline it has, not none and not the restored ones; so is
// the result of an ID repeated within the call.
func TestRestoreResultsCarryTheStoredMeta(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b).Truncate(time.Millisecond)
		due := now.Add(time.Hour)
		if _, err := q.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{"tenant": "acme"}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "x", Due: due, Owner: "wf", Labels: labels, FireWithin: time.Minute}}); err != nil {
			t.Fatal(err)
		}
		other := map[string]string{"tenant": "other"}
		res, err := q.Restore(ctx, []queue.Timer{
			{ID: "x", State: queue.StateScheduled, Due: due, CreatedAt: now, Owner: "restorer", Labels: other},
			{ID: "y", State: queue.StateScheduled, Due: due, CreatedAt: now, Owner: "wf2", Epoch: 4, Labels: labels, Deadline: due.Add(time.Hour)},
			{ID: "y", State: queue.StateScheduled, Due: due, CreatedAt: now},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []struct {
			created  bool
			owner    string
			epoch    uint64
			deadline time.Time
		}{
			{false, "wf", 1, due.Add(time.Minute)},
			{true, "wf2", 4, due.Add(time.Hour)},
			{false, "wf2", 4, due.Add(time.Hour)},
		} {
			got := res[i]
			if got.Created != want.created || got.Timer.Owner != want.owner || got.Timer.Epoch != want.epoch ||
				!maps.Equal(got.Timer.Labels, labels) || !got.Timer.Deadline.Equal(want.deadline) {
				t.Errorf("result %d (%s): created %v owner %q epoch %d labels %v deadline %v; want %v, %q, %d, %v, %v",
					i, got.Timer.ID, got.Created, got.Timer.Owner, got.Timer.Epoch, got.Timer.Labels, got.Timer.Deadline,
					want.created, want.owner, want.epoch, labels, want.deadline)
			}
		}
		if tm, err := q.Get(ctx, "x"); err != nil || tm.Owner != "wf" || !maps.Equal(tm.Labels, labels) {
			t.Fatalf("x after the restore: %+v %v, want it unchanged", tm, err)
		}
	})
}

// TestRelativeTimerFireByBeforeItsDueIsRefused: a timer due in a while
// (NewTimerIn), whose due time only the server's clock resolves, with a
// FireBy before that due time could never be delivered: the script
// refuses it before any write, with the error an absolute due time gets
// from validation (ErrInvalidOptions, a FieldError naming FireBy and the
// batch item), not an unknown outcome; a FireBy after the resolved due
// time is taken.
func TestRelativeTimerFireByBeforeItsDueIsRefused(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		soon := serverNow(t, b).Add(time.Minute)
		ok := queue.NewTimerIn("ok", time.Hour, nil)
		bad := queue.NewTimerIn("bad", time.Hour, nil)
		bad.FireBy, bad.Owner = soon, "wf"
		for name, batch := range map[string][]queue.NewTimer{"alone": {bad}, "second of a batch": {ok, bad}} {
			_, err := q.ScheduleBatch(ctx, batch)
			var fe *queue.FieldError
			if !errors.Is(err, queue.ErrInvalidOptions) || errors.Is(err, queue.ErrOutcomeUnknown) || !errors.As(err, &fe) ||
				fe.Field != "FireBy" || fe.Item != len(batch)-1 {
				t.Fatalf("%s: %v (%+v), want a FieldError of FireBy, item %d, wrapping ErrInvalidOptions", name, err, fe, len(batch)-1)
			}
			for _, id := range []string{"ok", "bad"} {
				if tm, err := q.Get(ctx, id); !errors.Is(err, queue.ErrNotFound) {
					t.Fatalf("%s: %s was written: %+v %v", name, id, tm, err)
				}
			}
			if w, err := q.NextWake(ctx, "wf"); err != nil || w.Scheduled != 0 {
				t.Fatalf("%s: the owner indexes a timer: %+v %v", name, w, err)
			}
		}
		later := queue.NewTimerIn("later", time.Minute, nil)
		later.FireBy = soon.Add(time.Hour)
		res, err := q.ScheduleBatch(ctx, []queue.NewTimer{later})
		if err != nil || !res[0].Created || !res[0].Timer.Deadline.Equal(later.FireBy.Truncate(time.Millisecond)) {
			t.Fatalf("FireBy after the resolved due time: %+v %v", res, err)
		}
	})
}

// TestRestoreDebounceKeepsMeta: RestoreDebounce writes a debounce window's
// timer with the owner, labels, epoch and deadline it had, as Restore
// writes a timer's: Get, a push of the reopened window and NextWake see
// them, the owner's epoch rises to the timer's (on every shard), a settled
// window's timer keeps them too, and restoring an ID that exists leaves it
// alone and answers with the meta it has. Before, the script took no meta:
// the restored window's timer had no owner, labels, epoch or deadline.
func TestRestoreDebounceKeepsMeta(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		src := newQueue(t, b, queue.Options{})
		for range 3 {
			if _, err := src.BumpEpoch(ctx, "wf", queue.BumpOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		labels := map[string]string{"kind": "digest", "tenant": "acme"}
		open := debounce(t, src, "mail", queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Owner: "wf", Labels: labels})
		orig, err := src.Get(ctx, open.Timer.ID)
		if err != nil || orig.Owner != "wf" || orig.Epoch != 3 || !maps.Equal(orig.Labels, labels) {
			t.Fatalf("the window's timer: %+v, %v", orig, err)
		}
		// No DebounceOptions sets a deadline; an import line may carry one.
		orig.Deadline = orig.Due.Add(time.Hour).Truncate(time.Millisecond)
		same := func(what string, got queue.Timer) {
			t.Helper()
			if got.Owner != orig.Owner || got.Epoch != orig.Epoch || !maps.Equal(got.Labels, orig.Labels) || !got.Deadline.Equal(orig.Deadline) {
				t.Errorf("%s: owner %q epoch %d labels %v deadline %v; want %q, %d, %v, %v", what,
					got.Owner, got.Epoch, got.Labels, got.Deadline, orig.Owner, orig.Epoch, orig.Labels, orig.Deadline)
			}
		}

		dst := newQueue(t, b, queue.Options{})
		res, err := dst.RestoreDebounce(ctx, queue.RestoredWindow{Timer: orig, Deadline: open.Deadline})
		if err != nil || !res.Created {
			t.Fatalf("RestoreDebounce: %+v, %v", res, err)
		}
		same("the result", res.Timer)
		got, err := dst.Get(ctx, orig.ID)
		if err != nil {
			t.Fatal(err)
		}
		same("Get after the restore", got)
		if e, err := dst.Epoch(ctx, "wf"); err != nil || e != 3 {
			t.Errorf("owner wf's epoch after the restore: %d, %v; want 3, the timer's", e, err)
		}
		if w, err := dst.NextWake(ctx, "wf"); err != nil || w.Scheduled != 1 {
			t.Errorf("NextWake(wf) after the restore: %+v, %v; want the window's timer", w, err)
		}
		pushed := debounce(t, dst, "mail", queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour})
		if pushed.Outcome == queue.DebounceCreated || pushed.Timer.ID != orig.ID {
			t.Fatalf("a push after the restore: %+v, want the restored window's timer", pushed)
		}
		same("the push's result", pushed.Timer)

		// An existing ID is left as it is, and the result says what it has.
		other := orig
		other.Owner, other.Epoch, other.Labels, other.Deadline = "intruder", 9, map[string]string{"tenant": "other"}, time.Time{}
		again, err := dst.RestoreDebounce(ctx, queue.RestoredWindow{Timer: other, Deadline: open.Deadline})
		if err != nil || again.Created {
			t.Fatalf("RestoreDebounce of an existing ID: %+v, %v", again, err)
		}
		same("the existing ID's result", again.Timer)
		if got, err := dst.Get(ctx, orig.ID); err != nil {
			t.Fatal(err)
		} else {
			same("Get after restoring the existing ID", got)
		}
		if e, err := dst.Epoch(ctx, "intruder"); err != nil || e != 0 {
			t.Errorf("owner intruder's epoch: %d, %v; want 0, nothing written", e, err)
		}

		// A settled window's timer keeps its meta as well.
		done := orig
		done.ID, done.State, done.CancelledAt = queue.DebounceID("old", 1000), queue.StateCancelled, time.UnixMilli(2000)
		done.Due, done.CreatedAt, done.Deadline = time.UnixMilli(1500), time.UnixMilli(1000), time.UnixMilli(3000)
		if _, err := dst.RestoreDebounce(ctx, queue.RestoredWindow{Timer: done}); err != nil {
			t.Fatal(err)
		}
		got, err = dst.Get(ctx, done.ID)
		if err != nil || got.State != queue.StateCancelled || got.Owner != "wf" || got.Epoch != 3 ||
			!maps.Equal(got.Labels, labels) || !got.Deadline.Equal(done.Deadline) {
			t.Errorf("the cancelled window's timer: %+v, %v; want owner wf, epoch 3, labels %v, deadline %v", got, err, labels, done.Deadline)
		}
	})
}
