package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// Schedule a timer, fire it as a worker would, and wait for it.
func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	q, err := queue.New(rdb, queue.Options{Namespace: "orders"})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	id := queue.DeriveID("order-42", 0)
	res, _ := q.Schedule(ctx, id, time.Now().Add(-time.Millisecond), []byte("expire order 42"))
	fmt.Println("created:", res.Created)

	claim, _ := q.Engine().Claim(ctx, 100) // what timerworker does
	fmt.Println("fired:", string(claim.Fired[0].Payload))

	fmt.Println("wait:", q.Wait(ctx, id))
	again, _ := q.Schedule(ctx, id, time.Now().Add(time.Hour), nil)
	fmt.Println("replay:", again.Created, again.Timer.State)
	// Output:
	// created: true
	// fired: expire order 42
	// wait: <nil>
	// replay: false fired
}

// A workflow step sleeps durably: the ID comes from (execution, step), so a
// re-run of the step after a crash finds the same timer, and once it has
// fired SleepUntil returns at once.
func ExampleQueue_SleepUntil() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	q, _ := queue.New(rdb, queue.Options{Namespace: "workflows"})
	defer q.Close()

	id := queue.DeriveID("exec-7", 3) // step 3 of execution exec-7
	// A worker fires it in the background (here, claims until one fires,
	// or until the example is done with it).
	claimCtx, stopClaims := context.WithCancel(ctx)
	claimsDone := make(chan struct{})
	go func() {
		defer close(claimsDone)
		for claimCtx.Err() == nil {
			if res, _ := q.Engine().Claim(claimCtx, 100); len(res.Fired) > 0 {
				return
			}
		}
	}()
	fmt.Println("first run:", q.SleepUntil(ctx, id, time.Now(), nil))
	stopClaims()
	<-claimsDone

	// The replay after a crash: same ID, already fired, no wait.
	start := time.Now()
	err := q.SleepUntil(ctx, id, time.Now().Add(time.Hour), nil)
	fmt.Println("replay:", err, time.Since(start) < time.Second)
	// Output:
	// first run: <nil>
	// replay: <nil> true
}

// ScheduleBatch schedules many timers in one script call per 500, and
// reports for each whether it was new.
func ExampleQueue_ScheduleBatch() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	q, _ := queue.New(rdb, queue.Options{Namespace: "reminders"})
	defer q.Close()

	due := time.Now().Add(time.Hour)
	_, _ = q.Schedule(ctx, "r-2", due, nil)
	res, err := q.ScheduleBatch(ctx, []queue.NewTimer{
		{ID: "r-1", Due: due, Payload: []byte("call mum")},
		{ID: "r-2", Due: due},
		{ID: "r-3", Due: due.Add(time.Minute)},
	})
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Println(r.Timer.ID, r.Created)
	}
	// Output:
	// r-1 true
	// r-2 false
	// r-3 true
}

// A delay counted by the Redis server's clock: the due time is TIME inside
// the script plus the delay, whatever the clock of the calling host says.
func ExampleQueue_ScheduleIn() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)) // the server's clock
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	q, _ := queue.New(rdb, queue.Options{Namespace: "reminders"})
	defer q.Close()

	res, _ := q.ScheduleIn(ctx, "call-back", 90*time.Second, nil)
	fmt.Println(res.Timer.Due.Format(time.RFC3339))
	// Output:
	// 2030-01-01T12:01:30Z
}

// Copy timers from one namespace to another keeping their states: the fired
// timer stays fired in the copy and does not fire again.
func ExampleQueue_Restore() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	src, _ := queue.New(rdb, queue.Options{Namespace: "old"})
	defer src.Close()
	dst, _ := queue.New(rdb, queue.Options{Namespace: "new"})
	defer dst.Close()

	_, _ = src.Schedule(ctx, "done", time.Now().Add(-time.Second), nil)
	_, _ = src.Schedule(ctx, "later", time.Now().Add(time.Hour), nil)
	_, _ = src.Engine().Claim(ctx, 100) // "done" fires in the old namespace

	page, _ := src.List(ctx, queue.ListOptions{})
	res, _ := dst.Restore(ctx, page.Timers)
	// A listing's order depends on the layout of the shard's keys
	// (queue.ListPage): print the copies by ID.
	slices.SortFunc(res, func(a, b queue.ScheduleResult) int { return strings.Compare(a.Timer.ID, b.Timer.ID) })
	for _, r := range res {
		fmt.Println(r.Timer.ID, r.Timer.State, r.Created)
	}
	claim, _ := dst.Engine().Claim(ctx, 100)
	fmt.Println("fired again:", len(claim.Fired))
	// Output:
	// done fired true
	// later scheduled true
	// fired again: 0
}

// Executors fence each other with an owner's epoch: each bumps it when it
// takes a workflow over, schedules under it, and refuses fires from before
// its takeover. The executor that lost the workflow can no longer schedule
// for it.
func ExampleQueue_BumpEpoch() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	q, _ := queue.New(rdb, queue.Options{Namespace: "workflows"})
	defer q.Close()
	past := time.Now().Add(-time.Second)

	// Executor A runs the workflow at epoch 1.
	a, _ := q.BumpEpoch(ctx, "wf-9", queue.BumpOptions{})
	q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "wf-9/step-1", Due: past, Owner: "wf-9", Epoch: a.Epoch}})

	// Executor B takes it over at epoch 2; A is fenced off.
	b, _ := q.BumpEpoch(ctx, "wf-9", queue.BumpOptions{})
	q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "wf-9/step-2", Due: past, Owner: "wf-9", Epoch: b.Epoch}})
	_, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "wf-9/zombie", Due: past, Owner: "wf-9", Epoch: a.Epoch}})
	fmt.Println("A schedules:", errors.Is(err, queue.ErrStaleEpoch))

	q.Engine().Claim(ctx, 100) // what timerworker does
	for _, id := range []string{"wf-9/step-1", "wf-9/step-2"} {
		t, _ := q.WaitFired(ctx, id)
		fmt.Println(id, "epoch", t.Epoch, "stale for B:", t.Epoch < b.Epoch)
	}
	// Output:
	// A schedules: true
	// wf-9/step-1 epoch 1 stale for B: true
	// wf-9/step-2 epoch 2 stale for B: false
}

// Cancel every timer a workflow owns, and read when it would next wake.
func ExampleQueue_CancelMatching() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	q, _ := queue.New(rdb, queue.Options{Namespace: "workflows"})
	defer q.Close()

	due := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	q.ScheduleBatch(ctx, []queue.NewTimer{
		{ID: "a/1", Due: due, Owner: "wf-a", Labels: map[string]string{"tenant": "acme"}},
		{ID: "a/2", Due: due.Add(time.Hour), Owner: "wf-a"},
		{ID: "b/1", Due: due, Owner: "wf-b"},
	})
	w, _ := q.NextWake(ctx, "wf-a")
	fmt.Println("wf-a:", w.Scheduled, "scheduled, next", w.Next.Format(time.RFC3339))

	job, _ := q.CancelMatching(ctx, queue.CancelFilter{Owner: "wf-a"})
	fmt.Println(job.State, job.Counts.Cancelled, "cancelled")
	w, _ = q.NextWake(ctx, "wf-a")
	fmt.Println("wf-a:", w.Scheduled, "scheduled")
	// Output:
	// wf-a: 2 scheduled, next 2030-01-01T00:00:00Z
	// done 2 cancelled
	// wf-a: 0 scheduled
}

// A pull consumer leases fires, handles them and acknowledges them. A fire
// past its deadline is never handed out: Lease dead-letters it and says so.
func ExampleQueue_Lease() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	q, _ := queue.New(rdb, queue.Options{Namespace: "orders"})
	defer q.Close()

	due := time.Now().Add(-time.Minute)
	q.ScheduleBatch(ctx, []queue.NewTimer{
		{ID: "order-1/expire", Due: due, Payload: []byte("expire order 1")},
		{ID: "order-2/remind", Due: due, Payload: []byte("remind"), FireWithin: time.Second}, // a minute late: too late
	})
	q.Engine().Claim(ctx, 100) // what timerworker does

	opts := queue.LeaseOptions{Lease: 30 * time.Second, OnDeadLetter: func(d queue.LeaseDeadLetter) {
		fmt.Println("dead-lettered:", d.Event.ID, "past its deadline:", d.PastDeadline)
	}}
	ds, _ := q.Lease(ctx, "billing", "worker-1", opts)
	for _, d := range ds {
		fmt.Println("handle:", string(d.Event.Payload))
	}
	acked, _ := q.Ack(ctx, "billing", ds[0].DeliveryID)
	fmt.Println("acked:", acked)
	// Output:
	// dead-lettered: order-2/remind past its deadline: true
	// handle: expire order 1
	// acked: [true]
}

// A bulk cancel's filter shows itself in one line, as timerctl and the
// dashboard show it.
func ExampleCancelFilter_String() {
	f := queue.CancelFilter{Owner: "wf-42", Labels: map[string]string{"tenant": "acme", "kind": "sleep"}, EpochBelow: 3}
	fmt.Println(f)
	// Output: owner "wf-42", labels kind="sleep" tenant="acme", epoch below 3
}
