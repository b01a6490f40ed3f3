package main

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestWorkerRecurringExactlyOnceUnderKills: 3 replicas fire a 1 s schedule
// for 60 s (TIMERQ_CHAOS_SECONDS overrides), one replica SIGKILLed and
// restarted after every 5 occurrences. Every occurrence fires exactly once, none is
// missing from the series, none is early.
func TestWorkerRecurringExactlyOnceUnderKills(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	if testing.Short() {
		t.Skip("60 s of chaos; run without -short")
	}
	run := 60 * time.Second
	if s := os.Getenv("TIMERQ_CHAOS_SECONDS"); s != "" {
		d, err := time.ParseDuration(s + "s")
		if err != nil {
			t.Fatal(err)
		}
		run = d
	}
	srv := redistest.Start(t, redistest.Config{})
	rdb := srv.Client(t)
	ns := redistest.Namespace(t)
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	args := []string{"--redis", srv.URL(), "--namespace", ns}
	workers := make([]*proc, 3)
	for i := range workers {
		workers[i] = startWorker(t, args...)
	}
	// CatchUpAll: the test wants an unbroken series, and a kill or a stall
	// of a loaded machine that delays an arm past two occurrences makes the
	// default CatchUpOnce drop all but the latest of them, as documented.
	info, _, err := q.Recurring().Put(context.Background(), queue.Recurring{ID: "chaos", Every: time.Second, CatchUp: queue.CatchUpAll, CatchUpLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	kills := 0
	fired := func() int64 {
		s, err := q.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return s.Fired
	}
	for time.Since(began) < run {
		// Five more occurrences between kills (about 5 s of a 1 s
		// schedule): the series must go on through every kill.
		from := fired()
		waitFor(t, 30*time.Second, "five more occurrences", func() bool { return fired() >= from+5 })
		i := rand.IntN(len(workers))
		workers[i].kill()
		kills++
		workers[i] = startWorker(t, args...)
	}
	if _, err := q.Recurring().Pause(context.Background(), "chaos"); err != nil {
		t.Fatal(err)
	}
	for i, w := range workers {
		waitFor(t, 5*time.Second, "the worker to start", func() bool { return strings.Contains(w.logText(), "worker started") })
		if code, _ := w.term(); code != 0 {
			t.Errorf("worker %d: exit %d on SIGTERM; log:\n%s", i, code, w.logText())
		}
	}

	counts := fireCounts(t, rdb, q) // fails on any early fire
	var worst time.Duration
	msgs, err := rdb.XRange(context.Background(), q.Keys().Stream(0), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		due, fired := m.Values["due"].(string), m.Values["fired"].(string)
		if l := time.Duration(atoi(fired)-atoi(due)) * time.Millisecond; l > worst {
			worst = l
		}
	}
	last := 0
	for k := 1; k <= len(counts)+1; k++ {
		id := queue.OccurrenceID("chaos", info.Anchor.Add(time.Duration(k)*time.Second))
		if counts[id] == 0 {
			break
		}
		last = k
	}
	dups := 0
	for id, c := range counts {
		if c > 1 {
			dups++
			t.Errorf("occurrence %s fired %d times", id, c)
		}
	}
	t.Logf("%d kills; %d occurrences fired over %v, unbroken up to #%d; worst lateness %v", kills, len(counts), time.Since(began).Round(time.Second), last, worst)
	if last != len(counts) || dups != 0 {
		t.Fatalf("the series breaks after occurrence %d of %d fired (a missing occurrence), %d duplicated", last, len(counts), dups)
	}
	if min := int(run/time.Second) - 2; last < min {
		t.Fatalf("only %d occurrences fired in %v; want at least %d", last, run, min)
	}
}

func atoi(s string) int64 {
	var n int64
	for _, c := range s {
		n = n*10 + int64(c-'0')
	}
	return n
}
