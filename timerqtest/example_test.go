package timerqtest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/timerqtest"
)

// Testing an order-timeout handler: an order not paid within 30 minutes
// is cancelled. The test moves the server clock instead of waiting.
func Example() {
	t := newExampleTB() // in a test, the test's *testing.T
	defer t.done()
	ctx := context.Background()

	// The code under test: placing an order arms its timeout, and the
	// timeout's handler cancels the order unless it was paid.
	orders := map[string]string{}
	place := func(q *queue.Queue, order string) error {
		orders[order] = "pending"
		_, err := q.ScheduleIn(ctx, "timeout:"+order, 30*time.Minute, []byte(order))
		return err
	}
	onTimeout := func(f queue.Fired) {
		if order := string(f.Payload); orders[order] == "pending" {
			orders[order] = "cancelled"
		}
	}

	// The test.
	env := timerqtest.New(t, queue.Options{})
	if err := place(env.Queue, "order-42"); err != nil {
		t.Fatalf("place: %v", err)
	}
	timerqtest.RequireScheduled(t, env.Queue, "timeout:order-42",
		&timerqtest.RequireScheduledOpts{Due: env.Now().Add(30 * time.Minute)})

	env.Advance(29 * time.Minute)
	fmt.Println("after 29m:", len(env.FireDue(t)), "fired, order-42 is", orders["order-42"])

	env.Advance(time.Minute)
	for _, f := range env.FireDue(t) {
		fmt.Println("after 30m:", f.ID, "fired", f.Lateness(), "late")
		onTimeout(f)
	}
	fmt.Println("order-42 is", orders["order-42"])
	timerqtest.RequireFired(t, env.Queue, "timeout:order-42")

	// Output:
	// after 29m: 0 fired, order-42 is pending
	// after 30m: timeout:order-42 fired 0s late
	// order-42 is cancelled
}

// FireDue keeps recurring schedules going as a worker does: after each
// occurrence it fires, it arms the next.
func ExampleEnv_FireDue_recurring() {
	t := newExampleTB() // in a test, the test's *testing.T
	defer t.done()
	ctx := context.Background()

	env := timerqtest.New(t, queue.Options{})
	start := env.Now()
	if _, _, err := env.Queue.Recurring().Put(ctx, queue.Recurring{ID: "report", Every: time.Hour}); err != nil {
		t.Fatalf("PutRecurring: %v", err)
	}
	for range 3 {
		env.Advance(time.Hour)
		for _, f := range env.FireDue(t) {
			schedule, nominal, _ := queue.ParseOccurrenceID(f.ID)
			fmt.Println(schedule, "fired, nominally at start +", nominal.Sub(start))
		}
	}
	// Output:
	// report fired, nominally at start + 1h0m0s
	// report fired, nominally at start + 2h0m0s
	// report fired, nominally at start + 3h0m0s
}
