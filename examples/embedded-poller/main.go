// Embedded-poller is an application that fires its own timers: it runs a
// poller.Poller in-process instead of deploying timerworker, and exports
// its metrics on the application's own Prometheus registry.
//
// Every replica of such an application runs its poller; they are all equal:
// each timer fires exactly once whichever replica claims it, and the
// maintenance (purging, stats) runs on one replica at a time under a lock.
//
//	go run ./examples/embedded-poller
//	TIMERQ_REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/embedded-poller
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/timerq/timerq/examples/internal/exredis"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

func main() {
	delay := flag.Duration("delay", 2*time.Second, "when the last timer is due")
	count := flag.Int("timers", 5, "how many timers to schedule, due evenly over -delay")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *delay, *count); err != nil {
		log.Fatal("embedded-poller: ", err)
	}
}

func run(ctx context.Context, delay time.Duration, count int) error {
	r, err := exredis.Connect()
	if err != nil {
		return err
	}
	defer r.Close() // deferred first, so it runs last: after the poller stopped
	fmt.Println("using", r.Describe())
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	q, err := queue.New(r.Client, queue.Options{Namespace: "embedded-poller"})
	if err != nil {
		return err
	}
	defer q.Close()

	// The poller's metrics go on the application's registry, next to its
	// own; serve it with promhttp.HandlerFor on the application's mux.
	reg := prometheus.NewRegistry()
	metrics := poller.NewMetrics()
	if err := metrics.Register(reg); err != nil {
		return err
	}
	// Hooks run on the poller's goroutine and must not block; this one
	// feeds the metrics and logs each fired timer.
	hooks := metrics.Hooks()
	feedMetrics := hooks.Claimed
	hooks.Claimed = func(res queue.ClaimResult) {
		feedMetrics(res)
		for _, f := range res.Fired {
			fmt.Printf("poller: fired %s (%s), %v after due\n", f.ID, f.Payload, f.Lateness())
		}
	}
	p, err := poller.New(q, poller.Options{Logger: logger, Hooks: hooks})
	if err != nil {
		return err
	}

	// Run the poller for as long as the application runs. Stopping it
	// lets the claim in flight finish and releases the maintenance lock.
	pctx, stopPoller := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Run(pctx) })
	defer func() { stopPoller(); wg.Wait() }()

	// The application's own work: schedule timers and wait for them.
	batch := rand.Text()[:6]
	ids := make([]string, count)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%s-%d", batch, i+1)
		due := time.Now().Add(delay * time.Duration(i+1) / time.Duration(count))
		if _, err := q.Schedule(ctx, ids[i], due, []byte(fmt.Sprintf("job %d", i+1))); err != nil {
			return err
		}
	}
	fmt.Printf("scheduled %d timers over the next %v\n", count, delay)
	wctx, cancel := context.WithTimeout(ctx, delay+10*time.Second)
	defer cancel()
	for _, id := range ids {
		if err := q.Wait(wctx, id); err != nil {
			return err
		}
	}

	// Shut down in order: the poller, then (deferred) the queue, then Redis.
	stopPoller()
	wg.Wait()
	// Another replica (or a timerworker) on the same namespace may have
	// fired some of them: each timer fires once, by whichever claims it.
	fmt.Printf("all %d timers fired; this process fired %v (timerq_timers_fired_total)\n",
		count, counterValue(reg, "timerq_timers_fired_total"))
	return nil
}

// counterValue reads one counter from the registry, as a scrape would.
func counterValue(reg *prometheus.Registry, name string) float64 {
	families, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}
