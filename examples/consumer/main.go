// Consumer expires unpaid orders. Each order gets a payment deadline timer;
// paying cancels it; a consumer of the fire stream expires the order when
// its timer fires.
//
// Consume delivers each fire event at least once: an event is acknowledged
// only after the handler returns nil, so a consumer that dies after acting
// but before the acknowledgement gets the event again. The handler
// therefore deduplicates by the timer ID, in the same atomic step as its
// side effect. The example forces one such redelivery to show it.
//
//	go run ./examples/consumer
//	TIMERQ_REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/consumer -poller
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
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/examples/internal/exredis"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// The shop's own keys. One hash tag keeps them in one Cluster slot, which
// the expire script needs.
const (
	statusKey  = "shop:{orders}:status"           // order ID -> pending, paid or expired
	handledKey = "shop:{orders}:timeouts-handled" // timer IDs whose timeout was applied
)

// expire applies a fired deadline: it records the timer ID as handled and
// expires the order if it is still pending, atomically, so that a
// redelivered event cannot act twice and a crash cannot record an event
// without acting on it. (In production, expire the handled marks after the
// fire stream's retention, or keep the mark on the order record itself.)
var expire = redis.NewScript(`
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 'duplicate' end
if redis.call('HGET', KEYS[1], ARGV[2]) ~= 'pending' then return 'not pending' end
redis.call('HSET', KEYS[1], ARGV[2], 'expired')
return 'expired'`)

// meaning explains the expire script's replies.
var meaning = map[string]string{
	"expired":     "order expired",
	"duplicate":   "a redelivery, already handled: acknowledged, nothing done",
	"not pending": "order no longer pending: nothing done",
}

func main() {
	deadline := flag.Duration("delay", 2*time.Second, "payment deadline of each order")
	inProcess := flag.Bool("poller", false, "fire timers from this process instead of timerworker (always on with the in-memory Redis)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *deadline, *inProcess); err != nil {
		log.Fatal("consumer: ", err)
	}
}

func run(ctx context.Context, deadline time.Duration, inProcess bool) error {
	r, err := exredis.Connect()
	if err != nil {
		return err
	}
	defer r.Close()
	rdb := r.Client
	fmt.Println("using", r.Describe())

	q, err := queue.New(rdb, queue.Options{Namespace: "consumer"})
	if err != nil {
		return err
	}
	defer q.Close()
	if r.InMemory || inProcess {
		stopPoller, err := exredis.StartPoller(q, rdb, poller.Hooks{})
		if err != nil {
			return err
		}
		defer stopPoller()
	}

	// Place three orders, each with a payment deadline.
	batch := rand.Text()[:6]
	orders := []string{batch + "-1", batch + "-2", batch + "-3"}
	for _, o := range orders {
		if err := rdb.HSet(ctx, statusKey, o, "pending").Err(); err != nil {
			return err
		}
		// One timer per order, its ID derived from the order: placing the
		// same order again finds the same timer instead of adding one.
		if _, err := q.Schedule(ctx, queue.DeriveID(o, 0), time.Now().Add(deadline), []byte(o)); err != nil {
			return err
		}
		fmt.Printf("order %s placed; it expires unless paid within %v\n", o, deadline)
	}

	// Order 2 is paid in time. The timer decides the race between payment
	// and deadline: Cancel and the firing are atomic in Redis, so either
	// the timer never fires or the payment is too late.
	if _, err := q.Cancel(ctx, queue.DeriveID(orders[1], 0)); err != nil {
		if errors.Is(err, queue.ErrAlreadyFired) {
			return fmt.Errorf("order %s: paid too late", orders[1])
		}
		return err
	}
	if err := rdb.HSet(ctx, statusKey, orders[1], "paid").Err(); err != nil {
		return err
	}
	fmt.Printf("order %s paid; its deadline timer is cancelled\n", orders[1])

	// What the handler did, for main to know when the demo is over.
	outcomes := make(chan string, 16)
	handler := func(ctx context.Context, ev queue.Event) error {
		order := string(ev.Payload)
		res, err := expire.Run(ctx, rdb, []string{statusKey, handledKey}, ev.ID, order).Text()
		if err != nil {
			return err // retried after RetryDelay
		}
		fmt.Printf("attempt %d: deadline of order %s fired %v after due: %s\n",
			ev.Attempt, order, ev.FiredAt.Sub(ev.Due), meaning[res])
		if strings.HasPrefix(order, batch+"-") { // not an older run's order
			outcomes <- order + " " + res
		}
		if ev.Attempt == 1 && order == orders[0] {
			// As if the process died right after expiring the order: no
			// acknowledgement, so Consume delivers the event again.
			fmt.Printf("attempt %d: failing before the acknowledgement (simulated crash)\n", ev.Attempt)
			return errors.New("simulated crash")
		}
		return nil
	}

	// A stable consumer name (a host or pod name) lets a restarted consumer
	// retry its own unacknowledged events at once; others' are reclaimed
	// after ClaimIdle. Run more consumers in the group to share the work.
	name, _ := os.Hostname()
	cctx, stopConsumer := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := q.Consume(cctx, "order-timeouts", "shop-"+name, handler, queue.ConsumeOptions{
			RetryDelay: 200 * time.Millisecond,
			OnError:    func(err error) { log.Print(err) },
		})
		if err != nil {
			log.Print(err) // only for invalid arguments
		}
	})
	defer func() { stopConsumer(); wg.Wait() }()

	// Orders 1 and 3 expire; order 1's redelivery is recognised as such.
	want := map[string]bool{orders[0] + " expired": true, orders[0] + " duplicate": true, orders[2] + " expired": true}
	timeout := time.After(deadline + 10*time.Second)
	for len(want) > 0 {
		select {
		case o := <-outcomes:
			delete(want, o)
		case <-timeout:
			return fmt.Errorf("still waiting for %v; is timerworker --namespace consumer running against this Redis? (or pass -poller)", want)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	stopConsumer()
	wg.Wait()

	statuses, err := rdb.HMGet(ctx, statusKey, orders...).Result()
	if err != nil {
		return err
	}
	for i, o := range orders {
		fmt.Printf("order %s: %v\n", o, statuses[i])
	}
	return nil
}
