package poller_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// Embed the poller in an application instead of running timerworker: Run
// fires due timers until its context ends.
func ExamplePoller_Run() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	q, _ := queue.New(rdb, queue.Options{Namespace: "app"})
	defer q.Close()

	p, err := poller.New(q, poller.Options{})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	_, _ = q.Schedule(ctx, "report", time.Now().Add(20*time.Millisecond), nil)
	fmt.Println("wait:", q.Wait(ctx, "report"))
	t, _ := q.Get(ctx, "report")
	fmt.Println("state:", t.State, "early:", t.FiredAt.Before(t.Due))

	stop()
	fmt.Println("run:", <-done)
	// Output:
	// wait: <nil>
	// state: fired early: false
	// run: <nil>
}
