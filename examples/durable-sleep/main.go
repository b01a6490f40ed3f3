// Durable-sleep is a workflow whose sleep survives the death of its process.
//
// The workflow derives its timer's ID from its execution ID and the step
// number (queue.DeriveID), and sleeps with SleepUntil. When the process dies
// mid-sleep, a worker still fires the timer on time; when the workflow is
// run again with the same execution ID, it replays from the start, derives
// the same ID, finds the timer already fired and returns at once.
//
// On the in-memory Redis a restart would lose every timer, so the example
// shows the crash and the replay inside one process: run 1 is cancelled
// mid-sleep (once its timer is in Redis) and its Queue closed, the
// in-process poller fires the timer meanwhile, and run 2, on a second
// Queue, replays. Against a real Redis,
// crash it for real:
//
//	timerworker --redis $TIMERQ_REDIS_URL --namespace durable-sleep &
//	go run ./examples/durable-sleep -exec order-7 -delay 10s   # kill -9 it mid-sleep
//	go run ./examples/durable-sleep -exec order-7              # replays, returns at once
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
	exec := flag.String("exec", "", "execution ID; run again with the same one to replay (default: a new one)")
	delay := flag.Duration("delay", 2*time.Second, "how long step 0 sleeps")
	inProcess := flag.Bool("poller", false, "fire timers from this process instead of timerworker (always on with the in-memory Redis)")
	flag.Parse()
	if *exec == "" {
		*exec = "order-" + rand.Text()[:8]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *exec, *delay, *inProcess); err != nil {
		log.Fatal("durable-sleep: ", err)
	}
}

const namespace = "durable-sleep"

func run(ctx context.Context, exec string, delay time.Duration, inProcess bool) error {
	r, err := exredis.Connect()
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Println("using", r.Describe())

	if !r.InMemory {
		// The real thing: this process is the workflow, timerworker (or
		// -poller) fires the timers. Kill it and run it again to replay.
		q, err := queue.New(r.Client, queue.Options{Namespace: namespace})
		if err != nil {
			return err
		}
		defer q.Close()
		if inProcess {
			stopPoller, err := exredis.StartPoller(q, r.Client, poller.Hooks{})
			if err != nil {
				return err
			}
			defer stopPoller()
		}
		fmt.Printf("pid %d; kill -9 it while it sleeps, then re-run with -exec %s\n", os.Getpid(), exec)
		return workflow(ctx, q, exec, delay, "")
	}

	// The in-memory Redis: the poller stands in for timerworker, which keeps
	// running while the workflow's process is dead.
	workerQ, err := queue.New(r.Client, queue.Options{Namespace: namespace})
	if err != nil {
		return err
	}
	defer workerQ.Close()

	// Run 1 "crashes" mid-sleep: once step 0's timer is in Redis, its
	// context ends and its Queue is closed, so nothing of it is left but
	// what it wrote to Redis. (A crash at a set time could come, on a slow
	// machine, before the timer was written, and leave nothing to fire.)
	q1, err := queue.New(r.Client, queue.Options{Namespace: namespace})
	if err != nil {
		return err
	}
	crashCtx, crash := context.WithCancel(ctx)
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		defer crash()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if t, err := workerQ.Get(crashCtx, queue.DeriveID(exec, 0)); err == nil && t.State == queue.StateScheduled {
				return // the sleep has begun: kill -9
			}
			select {
			case <-crashCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	err = workflow(crashCtx, q1, exec, delay, "run 1: ")
	crash()
	<-killed
	q1.Close()
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run 1 should have crashed mid-sleep, got %v", err)
	}
	fmt.Println("run 1: crashed mid-sleep (simulated: context ended, Queue closed)")

	// The worker fires the timer while no workflow runs. It starts only
	// now, after the crash, so that however slow the machine, it cannot
	// fire the timer while run 1 still sleeps on it.
	fired := make(chan string, 1)
	stopPoller, err := exredis.StartPoller(workerQ, r.Client, poller.Hooks{
		Claimed: func(res queue.ClaimResult) {
			for _, f := range res.Fired {
				select { // hooks must not block
				case fired <- f.ID:
				default:
				}
			}
		},
	})
	if err != nil {
		return err
	}
	defer stopPoller()

	select {
	case id := <-fired:
		fmt.Printf("worker: fired %s while no workflow was running\n", id)
	case <-time.After(delay + 10*time.Second):
		return errors.New("the worker did not fire the timer")
	case <-ctx.Done():
		return ctx.Err()
	}

	// Run 2 is a new process as far as timerq can tell: a new Queue, and the
	// workflow started from the top with the same execution ID.
	q2, err := queue.New(r.Client, queue.Options{Namespace: namespace})
	if err != nil {
		return err
	}
	defer q2.Close()
	return workflow(ctx, q2, exec, delay, "run 2: ")
}

// workflow is the code being made durable. It runs from the top on every
// (re)run: each step must derive the same timer ID on each run, which is
// why the ID comes from the execution ID and the step number, never from
// the clock or a random number.
//
// Only the sleeps replay here. A workflow engine would also record each
// step's result, so that a replay after step 1 ran does not repeat its side
// effect; that is the engine's job, not timerq's.
func workflow(ctx context.Context, q *queue.Queue, exec string, delay time.Duration, prefix string) error {
	fmt.Printf("%sexecution %s starts\n", prefix, exec)

	// Step 0: wait for the payment window to close. On a replay the due
	// time passed here is ignored: the timer keeps the first run's.
	id := queue.DeriveID(exec, 0)
	fmt.Printf("%sstep 0: SleepUntil(now+%v), timer %s\n", prefix, delay, id)
	start := time.Now()
	if err := q.SleepUntil(ctx, id, start.Add(delay), []byte(exec)); err != nil {
		return err
	}
	slept := time.Since(start).Round(time.Millisecond)

	// Only to explain what happened: SleepUntil itself needs no check.
	// (FiredAt is the Redis server's clock, start this machine's.)
	t, err := q.Get(ctx, id)
	if err != nil {
		return err
	}
	if t.FiredAt.Before(start) {
		fmt.Printf("%sstep 0: replayed: the timer had fired at %s, before this run reached it, so SleepUntil returned at once (%v)\n",
			prefix, t.FiredAt.Local().Format(time.TimeOnly+".000"), slept)
	} else {
		fmt.Printf("%sstep 0: woke after %v\n", prefix, slept)
	}

	// Step 1: the side effect the sleep was for.
	fmt.Printf("%sstep 1: sending the payment reminder for %s\n", prefix, exec)
	fmt.Printf("%sexecution %s done\n", prefix, exec)
	return nil
}
