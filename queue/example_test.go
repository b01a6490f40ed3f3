package queue_test

import (
	"context"
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
