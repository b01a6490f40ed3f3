package queue_test

import (
	"context"
	"fmt"
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

	claim, _ := q.Claim(ctx, 100) // what timerworker does
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
