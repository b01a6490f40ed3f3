package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// scheduleIDs schedules one timer per ID, due at due.
func scheduleIDs(t *testing.T, q *queue.Queue, due time.Time, ids ...string) {
	t.Helper()
	batch := make([]queue.NewTimer, len(ids))
	for i, id := range ids {
		batch[i] = queue.NewTimer{ID: id, Due: due, Payload: []byte("p")}
	}
	if _, err := q.ScheduleBatch(context.Background(), batch); err != nil {
		t.Fatalf("ScheduleBatch: %v", err)
	}
}

func seq(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return ids
}

// states reads the state of each ID.
func states(t *testing.T, q *queue.Queue, ids []string) map[queue.State]int {
	t.Helper()
	n := map[queue.State]int{}
	for _, id := range ids {
		tm, err := q.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		n[tm.State]++
	}
	return n
}

// TestCancelMatchingPrefix: a bulk cancel cancels the scheduled timers
// whose IDs start with the prefix, taken literally, counts those it found
// settled, and leaves every other timer alone.
func TestCancelMatchingPrefix(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		n := 40
		if b.Mini == nil {
			n = 400 // more than a listpack: HSCAN takes several steps
		}
		later := time.Now().Add(time.Hour)
		match := seq("wf-1/", n)
		scheduleIDs(t, q, later, match...)
		// Glob characters in the prefix are literal; these do not match.
		others := append(seq("wf-10/", 10), append(seq("wf-2/", 10), "wf-1", "wf-1*", "wf-1?x")...)
		scheduleIDs(t, q, later, others...)
		scheduleIDs(t, q, time.Now().Add(-time.Second), "wf-1/fired")
		claimAll(t, q)
		scheduleIDs(t, q, later, "wf-1/gone")
		if _, err := q.Cancel(ctx, "wf-1/gone"); err != nil {
			t.Fatal(err)
		}

		job, err := q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: "wf-1/"})
		if err != nil {
			t.Fatalf("CancelMatching: %v", err)
		}
		want := queue.CancelCounts{Cancelled: int64(n), Fired: 1, AlreadyCancelled: 1}
		if job.State != queue.CancelJobDone || job.Counts != want || job.ShardsDone != job.Shards || job.Finished.IsZero() {
			t.Fatalf("job = %+v, want done with %+v", job, want)
		}
		if got := states(t, q, match); got[queue.StateCancelled] != n {
			t.Fatalf("matching timers: %v, want all %d cancelled", got, n)
		}
		if got := states(t, q, others); got[queue.StateScheduled] != len(others) {
			t.Fatalf("other timers: %v, want all %d scheduled", got, len(others))
		}

		if b.Shards <= 1 {
			mustBeConsistent(t, b.Client, q, "a bulk cancel")
		}

		// Glob characters taken literally.
		job2, err := q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: "wf-1*"})
		if err != nil || job2.Counts != (queue.CancelCounts{Cancelled: 1}) {
			t.Fatalf("CancelMatching wf-1* = %+v, %v; want the one timer wf-1*", job2, err)
		}
		if got := states(t, q, []string{"wf-1", "wf-1?x"}); got[queue.StateScheduled] != 2 {
			t.Fatalf("wf-1 and wf-1?x: %v, want scheduled", got)
		}

		// Again: a no-op that finds them cancelled.
		again, err := q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: "wf-1/"})
		if err != nil || again.Counts != (queue.CancelCounts{Fired: 1, AlreadyCancelled: int64(n) + 1}) {
			t.Fatalf("second CancelMatching = %+v, %v", again, err)
		}

		got, err := q.CancelJobs().Get(ctx, job.ID)
		if err != nil || got.Counts != want || got.State != queue.CancelJobDone || got.Filter.IDPrefix != "wf-1/" ||
			!got.Created.Equal(job.Created) || !got.Finished.Equal(job.Finished) {
			t.Fatalf("Get = %+v, %v; want %+v", got, err, job)
		}
		list, err := q.CancelJobs().List(ctx)
		if err != nil || len(list) != 3 || list[2].ID != job.ID {
			t.Fatalf("List = %+v, %v; want the 3 jobs, newest first", list, err)
		}
		if _, err := q.CancelJobs().Get(ctx, "nope"); !errors.Is(err, queue.ErrCancelJobNotFound) {
			t.Fatalf("Get nope = %v, want ErrCancelJobNotFound", err)
		}
		if _, err := q.CancelMatching(ctx, queue.CancelFilter{}); !errors.Is(err, queue.ErrInvalidFilter) {
			t.Fatalf("empty filter: %v, want ErrInvalidFilter", err)
		}
	})
}

// TestCancelMatchingRacesClaims: timers come due and a claimer fires them
// while a bulk cancel runs; every selected timer ends exactly one of
// cancelled or fired, and the job's counts and the claims' fires say
// which.
func TestCancelMatchingRacesClaims(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		for name, f := range selectors("race/") {
			t.Run(name, func(t *testing.T) { raceCancelWithClaims(t, b, f) })
		}
	})
}

// selectors are a bulk cancel's three ways to select the timers that
// ownedBatch makes: by ID prefix (the records' scan), by owner (the owner
// index) and by label (the meta hash's scan).
func selectors(prefix string) map[string]queue.CancelFilter {
	return map[string]queue.CancelFilter{
		"prefix": {IDPrefix: prefix},
		"owner":  {Owner: "wf"},
		"label":  {Labels: map[string]string{"batch": "b1"}},
	}
}

// owned makes the timers of ids owned by "wf", labelled batch=b1, as the
// selectors select them.
func owned(batch []queue.NewTimer) []queue.NewTimer {
	for i := range batch {
		batch[i].Owner, batch[i].Labels = "wf", map[string]string{"batch": "b1"}
	}
	return batch
}

func raceCancelWithClaims(t *testing.T, b *redistest.Backend, f queue.CancelFilter) {
	ctx := context.Background()
	q := newQueue(t, b, queue.Options{})
	n, span := 200, 2000 // miniredis runs Lua about a hundred times slower
	if b.Mini == nil {
		n, span = 3000, 300
	}
	// Due from 100 ms ago to span ahead: some due before the cancel,
	// some while it runs, some after.
	ids := seq("race/", n)
	batch := make([]queue.NewTimer, n)
	now := time.Now()
	for i, id := range ids {
		batch[i] = queue.NewTimer{ID: id, Due: now.Add(time.Duration(i*(span+100)/n-100) * time.Millisecond)}
	}
	if _, err := q.ScheduleBatch(ctx, owned(batch)); err != nil {
		t.Fatal(err)
	}
	fired := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			res, err := q.Engine().Claim(ctx, 50)
			if err != nil {
				t.Errorf("Claim: %v", err)
				return
			}
			for _, f := range res.Fired {
				fired[f.ID]++
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	time.Sleep(150 * time.Millisecond) // wall time is the race: let the claimer fire some first
	job, err := q.CancelMatching(ctx, f)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("CancelMatching: %v", err)
	}
	for _, f := range claimAll(t, q) {
		fired[f.ID]++
	}
	st := states(t, q, ids)
	cancelled := st[queue.StateCancelled]
	for id, k := range fired {
		if k != 1 {
			t.Errorf("%s fired %d times", id, k)
		}
		if tm, _ := q.Get(ctx, id); tm.State != queue.StateFired {
			t.Errorf("%s fired, but its record is %s", id, tm.State)
		}
	}
	if cancelled+len(fired) != n || st[queue.StateFired] != len(fired) {
		t.Fatalf("%d cancelled + %d fired (records: %v), want %d in all", cancelled, len(fired), st, n)
	}
	if job.Counts != (queue.CancelCounts{Cancelled: int64(cancelled), Fired: int64(n - cancelled)}) {
		t.Fatalf("job counts %+v, want %d cancelled and %d fired before it came", job.Counts, cancelled, n-cancelled)
	}
	if b.Shards <= 1 {
		// No record both cancelled and in the fire stream, nothing half-written.
		mustBeConsistent(t, b.Client, q, "a bulk cancel racing claims")
	}
	t.Logf("%d cancelled, %d fired", cancelled, len(fired))
	if cancelled == 0 || cancelled == n {
		t.Logf("no race happened: all %d ended one way", n)
	}
}

// TestCancelJobResumesAfterRunnerDies: a bulk cancel too large for the
// call goes to the runners; one that dies after a step leaves its lease to
// expire, and the next resumes where it stopped, with exact totals.
func TestCancelJobResumesAfterRunnerDies(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		b.Shards = 4 // so that miniredis, whose HSCAN takes a shard in one step, has steps to resume
		for name, f := range selectors("big/") {
			t.Run(name, func(t *testing.T) { resumeCancelJob(t, b, f) })
		}
	})
}

func resumeCancelJob(t *testing.T, b *redistest.Backend, f queue.CancelFilter) {
	ctx := context.Background()
	q := newQueue(t, b, queue.Options{})
	n := 100
	if b.Mini == nil {
		n = 4000
	}
	ids := seq("big/", n)
	due := time.Now().Add(time.Hour)
	batch := make([]queue.NewTimer, n)
	for i, id := range ids {
		batch[i] = queue.NewTimer{ID: id, Due: due, Payload: []byte("p")}
	}
	if _, err := q.ScheduleBatch(ctx, owned(batch)); err != nil {
		t.Fatal(err)
	}
	scheduleIDs(t, q, time.Now().Add(time.Hour), seq("small/", 10)...)
	defer queue.SetCancelInCall(5)()

	job, err := q.CancelMatching(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != queue.CancelJobRunning || job.ShardsDone == job.Shards {
		t.Fatalf("job = %+v, want it handed to the runners", job)
	}
	inCall := job.Counts.Cancelled
	// A job of more than an ID prefix waits where workers that predate
	// owners never look: they read only the prefix, and would cancel every
	// timer of it, or every timer.
	ns := keyspace.Namespace(q.Namespace())
	in, notIn := ns.CancelRunning(), ns.CancelRunningFiltered()
	if f.Owner != "" || len(f.Labels) > 0 {
		in, notIn = notIn, in
	}
	if _, err := b.Client.ZScore(ctx, in, job.ID).Result(); err != nil {
		t.Fatalf("job %s not in %s: %v", job.ID, in, err)
	}
	if _, err := b.Client.ZScore(ctx, notIn, job.ID).Result(); err != redis.Nil {
		t.Fatalf("job %s is in %s too (%v)", job.ID, notIn, err)
	}

	// The first runner dies after one step.
	steps := 0
	restore := queue.SetCancelStepHook(func(string, int) bool { steps++; return false })
	defer restore()
	if _, err := q.Engine().RunCancelJobs(ctx, 300*time.Millisecond); err == nil {
		t.Fatal("the killed runner returned no error")
	}
	restore()
	mid, err := q.CancelJobs().Get(ctx, job.ID)
	if err != nil || mid.State != queue.CancelJobRunning || steps != 1 || mid.Counts.Cancelled <= inCall {
		t.Fatalf("after one step: %+v, %v (%d steps); want running, past the %d cancelled in the call", mid, err, steps, inCall)
	}
	// Its lease holds the job until it expires.
	if done, err := q.Engine().RunCancelJobs(ctx, time.Second); err != nil || done != 0 {
		t.Fatalf("RunCancelJobs under the dead runner's lease = %d, %v; want 0, nil", done, err)
	}
	if again, _ := q.CancelJobs().Get(ctx, job.ID); again.Counts != mid.Counts {
		t.Fatalf("a runner worked under another's lease: %+v, then %+v", mid.Counts, again.Counts)
	}
	redistest.Eventually(t, 5*time.Second, "another runner finishes the job", func() bool {
		if b.Mini != nil {
			b.Mini.FastForward(100 * time.Millisecond) // miniredis expires keys on its own clock
		}
		done, err := q.Engine().RunCancelJobs(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return done == 1
	})
	end, err := q.CancelJobs().Get(ctx, job.ID)
	if err != nil || end.State != queue.CancelJobDone || end.Counts != (queue.CancelCounts{Cancelled: int64(n)}) || end.ShardsDone != 4 {
		t.Fatalf("resumed job = %+v, %v; want done with %d cancelled, nothing else", end, err, n)
	}
	if got := states(t, q, ids); got[queue.StateCancelled] != n {
		t.Fatalf("states %v, want all %d cancelled", got, n)
	}
	if got := states(t, q, seq("small/", 10)); got[queue.StateScheduled] != 10 {
		t.Fatalf("others: %v", got)
	}
	if done, err := q.Engine().RunCancelJobs(ctx, time.Second); err != nil || done != 0 {
		t.Fatalf("RunCancelJobs after the end = %d, %v", done, err)
	}
}

// TestCancelMatchingNamesTheRefusedRight: a user who may not write the
// job's lease (SET) gets ErrPermission naming +set, not the EXECABORT
// with which Redis ends the transaction that records the job.
func TestCancelMatchingNamesTheRefusedRight(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "noset", "on", ">pw", "~*", "&*", "+@all", "-set").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "noset", Password: "pw"})
	defer rdb.Close()
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	schedule(t, q, "wf/1", time.Now().Add(time.Hour))
	_, err = q.CancelMatching(ctx, queue.CancelFilter{IDPrefix: "wf/"})
	if !errors.Is(err, queue.ErrPermission) || !strings.Contains(err.Error(), "+set") {
		t.Fatalf("CancelMatching without +set = %v, want ErrPermission naming +set", err)
	}
}
