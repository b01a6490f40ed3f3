// Quickstart schedules a timer, waits for it to fire, and prints how late it
// fired.
//
//	go run ./examples/quickstart                  # in-memory Redis
//	TIMERQ_REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/quickstart -poller
//
// Against a real Redis, timers are fired by timerworker
// (timerworker --redis URL --namespace quickstart); -poller fires them from
// this process instead.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/timerq/timerq/examples/internal/exredis"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

func main() {
	delay := flag.Duration("delay", 2*time.Second, "how far ahead the timer is due")
	inProcess := flag.Bool("poller", false, "fire timers from this process instead of timerworker (always on with the in-memory Redis)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *delay, *inProcess); err != nil {
		log.Fatal("quickstart: ", err)
	}
}

func run(ctx context.Context, delay time.Duration, inProcess bool) error {
	r, err := exredis.Connect()
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Println("using", r.Describe())

	q, err := queue.New(r.Client, queue.Options{Namespace: "quickstart"})
	if err != nil {
		return err
	}
	defer q.Close()
	if r.InMemory || inProcess {
		stopPoller, err := exredis.StartPoller(q, r.Client, poller.Hooks{})
		if err != nil {
			return err
		}
		defer stopPoller()
	}

	// A fresh ID per run: scheduling an existing ID returns that timer
	// unchanged, which is what replays want (see examples/durable-sleep) but
	// not a demo run twice against the same Redis.
	id := "quickstart-" + rand.Text()
	res, err := q.Schedule(ctx, id, time.Now().Add(delay), []byte("hello"))
	if err != nil {
		return err
	}
	fmt.Printf("scheduled %s, due %s\n", id, res.Timer.Due.Format(time.RFC3339Nano))

	// Bound the wait, so that a missing timerworker shows as an error
	// rather than a hang.
	wctx, cancel := context.WithTimeout(ctx, delay+10*time.Second)
	defer cancel()
	if err := q.Wait(wctx, id); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: nothing fired the timer; run timerworker --namespace quickstart against this Redis, or pass -poller", err)
		}
		return err
	}
	woke := time.Now()

	t, err := q.Get(ctx, id)
	if err != nil {
		return err
	}
	// Due and FiredAt are both the Redis server's clock, so this lateness is
	// free of any skew between this machine and the Redis host; the second
	// figure also includes the pub/sub hop back to this process.
	fmt.Printf("fired %v after its due time (Redis clock); Wait returned %v after it (local clock)\n",
		t.FiredAt.Sub(t.Due), woke.Sub(t.Due).Round(time.Millisecond))
	return nil
}
