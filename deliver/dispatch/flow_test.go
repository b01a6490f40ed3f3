package dispatch_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// flowSink is an endpoint that records, per flow key (the timer ID's part
// before '/'), when each fire first came and its delay from its fire time,
// and how many of the key's requests overlapped at most.
type flowSink struct {
	mu      sync.Mutex
	at      map[string][]time.Time
	delay   map[string][]time.Duration // arrival - fired
	now     map[string]int
	maxOver map[string]int
	hold    map[string]time.Duration
	seen    map[string]bool // timer IDs
}

func newFlowSink(t *testing.T, hold map[string]time.Duration) (*flowSink, string) {
	f := &flowSink{at: map[string][]time.Time{}, delay: map[string][]time.Duration{}, now: map[string]int{},
		maxOver: map[string]int{}, hold: hold, seen: map[string]bool{}}
	s := newSink(t, func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(deliver.HeaderTimerID)
		key, _, _ := strings.Cut(id, "%2F")
		key, _, _ = strings.Cut(key, "/")
		fired, _ := time.Parse(time.RFC3339Nano, r.Header.Get(deliver.HeaderFiredAt))
		f.mu.Lock()
		// A fire counts once, at its first delivery: a lease that ran out
		// on a loaded machine delivers it again.
		if !f.seen[id] {
			f.seen[id] = true
			f.at[key] = append(f.at[key], time.Now())
			f.delay[key] = append(f.delay[key], time.Since(fired))
		}
		f.now[key]++
		f.maxOver[key] = max(f.maxOver[key], f.now[key])
		d := f.hold[key]
		f.mu.Unlock()
		if d > 0 {
			// Wall time is the thing under test: a request that takes d,
			// after waiting up to 300 ms for a second of its key, so that
			// a loaded machine, whose dispatchers lease slowly (CI's
			// miniredis arm once never overlapped two 30 ms requests),
			// still loads the key's bound; a limiter that lets more
			// through then overlaps more.
			for start := time.Now(); time.Since(start) < 300*time.Millisecond; time.Sleep(time.Millisecond) {
				f.mu.Lock()
				two := f.now[key] >= 2
				f.mu.Unlock()
				if two {
					break
				}
			}
			time.Sleep(d)
		}
		f.mu.Lock()
		f.now[key]--
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return f, s.URL
}

func (f *flowSink) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.at[key])
}

// runDispatchers runs n dispatchers of one group on q, all delivering to
// url, until stop is called or the test ends.
func runDispatchers(t *testing.T, q *queue.Queue, n int, url string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		d := &dispatch.Dispatcher{
			Queue:    q,
			Consumer: fmt.Sprintf("d%d", i),
			Sender:   newSender(t, &deliver.Guard{Allow: loopback}),
			Route:    func(queue.Event) string { return "ep" },
			Lookup: func(context.Context, string) (deliver.Endpoint, error) {
				return deliver.Endpoint{Name: "ep", URL: url, MaxInFlight: 256}, nil
			},
			Lease:   5 * time.Second,
			OnError: func(err error) { t.Errorf("dispatcher: %v", err) },
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = d.Run(ctx)
		}()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// fireKeys schedules, for each key, n timers "<key>/<i>" of flow key key,
// due in the past, and fires them.
func fireKeys(t *testing.T, q *queue.Queue, n map[string]int) {
	t.Helper()
	var batch []queue.NewTimer
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for i := range n[k] {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("%s/%d", k, i), Due: time.Now().Add(-time.Second), FlowKey: k,
				Payload: []byte("{}")})
		}
	}
	for start := 0; start < len(batch); start += queue.MaxBatch {
		if _, err := q.ScheduleBatch(context.Background(), batch[start:min(start+queue.MaxBatch, len(batch))]); err != nil {
			t.Fatal(err)
		}
	}
	fired := 0
	for fired < len(batch) {
		res, err := q.Engine().Claim(context.Background(), queue.MaxBatch)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Fired) == 0 {
			t.Fatalf("fired %d of %d timers due in the past", fired, len(batch))
		}
		fired += len(res.Fired)
	}
}

// Four dispatchers share one key's rate and in-flight bound: the rate never
// exceeds the policy beyond GCRA's tolerance, and the key's overlapping
// requests never exceed its bound, as the receiver counts them.
func TestDispatchFlowRateAndInFlight(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b)
		// rate: 100 a second, paced; conc: at most 3 at once, each
		// request taking 30 ms.
		nRate, nConc := 250, 40
		if b.Mini != nil {
			nRate, nConc = 120, 15 // Lua runs in a Go interpreter there
		}
		if s, _ := strconv.Atoi(os.Getenv("TIMERQ_FLOW_RATE_SECONDS")); s > 0 && b.Mini == nil {
			nRate = 100 * s // BENCHMARKS.md's long run: the rate over s seconds
		}
		for _, p := range []queue.FlowPolicy{
			{Key: "rate", Rate: 100, Period: time.Second},
			{Key: "conc", Rate: 1000, Period: 100 * time.Millisecond, MaxInFlight: 3},
		} {
			if err := q.Flows().PutPolicy(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		sink, url := newFlowSink(t, map[string]time.Duration{"conc": 30 * time.Millisecond})
		fireKeys(t, q, map[string]int{"rate": nRate, "conc": nConc})
		// No grant of key rate comes before start: the dispatchers, the
		// only ones to take its slots, start after it.
		start := time.Now()
		runDispatchers(t, q, 4, url)
		// The bound only ends a failing run: the rate itself is checked
		// below, from the arrival times (CI's miniredis arm once took
		// over 3.6 s for 120 fires at load 20).
		redistest.Eventually(t, time.Duration(nRate)*30*time.Millisecond+20*time.Second, "every fire delivered", func() bool {
			return sink.count("rate") >= nRate && sink.count("conc") >= nConc
		})
		sink.mu.Lock()
		defer sink.mu.Unlock()
		at := sink.at["rate"]
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		// Logged only: the rate from the 10th percentile arrival to the
		// last, past the burst an idle key may start with.
		from := len(at) / 10
		got := float64(len(at)-1-from) / at[len(at)-1].Sub(at[from]).Seconds()
		first := 0
		for _, a := range at {
			if a.Sub(at[0]) < time.Second {
				first++
			}
		}
		t.Logf("rate: %d deliveries at %.1f/s (want 100/s), %d in the first second; conc: at most %d at once",
			len(at), got, first, sink.maxOver["conc"])
		// Arrivals, not grants, are counted, and a first request that took
		// longer than the next ones (it opens a connection; on a loaded CI
		// machine hundreds of milliseconds) lets those granted after it
		// into its second: 161 arrived in the first second of a run whose
		// rate held, with four jobs beside it. So arrivals bound only a
		// missing limiter here (all 250 in the first second); the burst
		// itself, 26, is held to its number by queue's
		// TestFlowRateBurstIsTauOverTPlusOne on a clock that stands still.
		if first > 200 {
			t.Errorf("%d deliveries of key rate in its first second: no limiter, or one that lets most of them through at once", first)
		}
		// The upper bound is GCRA's own, and it holds whatever the
		// machine's load: every grant of the key came at or after start,
		// and from start to any grant GCRA allows at most the rate times
		// that time plus its tolerance (26, flow_take.lua: 250 ms worth
		// plus one). So the last delivery arrives no sooner than
		// (n-26)/100 s after start; a load that delays arrivals only
		// moves it later. The arrival spans above are only logged: an
		// arrival lags its grant, the first ones most (they open
		// connections), which squeezed 250 arrivals into 1.97 s once in
		// CI, a run whose grants kept their rate.
		//
		// Only the upper bound is checked here: a loaded machine slows the
		// dispatchers, never speeds the limiter. A lower bound measured
		// the machine (CI's suite, with other packages beside it under
		// -race, saw 78.8/s once and 49.4/s once, against 102-104/s on a
		// quiet one and 99.8-100.0/s in BENCHMARKS.md's 60 s runs). A
		// limiter that throttles too hard is caught on a clock that
		// stands still instead, where the steady grants are counted
		// exactly (queue's TestFlowRateBurstIsTauOverTPlusOne).
		//
		// One grant of slack covers the millisecond of TIME's and the
		// wall clock's rounding.
		sinceStart := at[len(at)-1].Sub(start).Seconds()
		if bound := float64(len(at)-26-1) / sinceStart; bound > 100 {
			t.Errorf("key rate: %d deliveries, the last %.2f s after the dispatchers started: %.1f/s beyond GCRA's tolerance of 26, want at most 100/s",
				len(at), sinceStart, bound)
		}
		if sink.maxOver["conc"] > 3 {
			t.Errorf("key conc had %d requests at once, above its bound of 3", sink.maxOver["conc"])
		}
		if sink.maxOver["conc"] < 2 {
			t.Errorf("key conc never had 2 requests at once: the test does not load it")
		}
	})
}

// One key holds 90% of a burst, a hundred keys one fire each: the small
// keys' fires are not queued behind the big key's backlog. Their p99
// delivery delay (arrival minus fire time) stays far below the big key's
// drain time; BENCHMARKS.md has the measured figures.
func TestDispatchFlowFairAcrossKeys(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		nBig, nSmall, rate := 900, 100, 20
		if b.Mini != nil {
			nBig, nSmall = 180, 20
		}
		if n, _ := strconv.Atoi(os.Getenv("TIMERQ_FLOW_FAIR_BURST")); n > 0 && b.Mini == nil {
			// BENCHMARKS.md's long run: a burst of n, every key 2,000 a second.
			nBig, nSmall, rate = n*9/10, n/10, 200
		}
		// Every key: rate per 100 ms, 200 a second. The big key's backlog,
		// past the burst an idle key starts with (26), takes 4.4 s (0.8 s
		// on miniredis) to drain.
		paced := time.Duration(nBig-26) * 100 * time.Millisecond / time.Duration(rate)
		// Fairness holds only while the limiter holds the big key back. A
		// machine that delivers slower than its rate (CI's miniredis arm,
		// with a build beside its -race suite, drained it in 11.7 s: 14
		// times its pace) never loads the limiter, and the stream's order
		// is then the only order: such a try is run again, on a namespace
		// of its own, and three of them fail the test as too loaded.
		var drains []time.Duration
		for range 3 {
			before, big, p99, drain := fairTry(t, b, nBig, nSmall, rate)
			if drain > 6*paced {
				drains = append(drains, drain)
				continue
			}
			// Fairness is an order, not a time: a loaded machine stretches
			// the lease passes that park the big key's backlog, and with
			// them the small keys' delay, as much as the drain (CI runs
			// under -race saw the drain take 6.4 s on 16 shards with the
			// p99 at 2.5 s, and 3.9 s on miniredis with the p99 at 2.5 s,
			// against 4.4 s and 0.2-0.3 s on a quiet machine). So the
			// bound counts the big key's deliveries that came first, which
			// its rate paces whatever the load: at most two thirds of them
			// (measured: 58-163 of 900, and 44-68 of 180 on miniredis,
			// whose first burst alone is 51; all of them when the small
			// keys queue behind the backlog).
			if before > big*2/3 {
				t.Errorf("small keys' p99 delivery came after %d of the big key's %d deliveries (delay %v, drain %v): they waited behind its backlog",
					before, big, p99, drain)
			}
			return
		}
		t.Fatalf("the big key drained in %v, over 6 times its pace of %v, in each of 3 tries: the machine is too loaded to load the limiter, so fairness was not tested",
			drains, paced)
	})
}

// fairTry is one try of TestDispatchFlowFairAcrossKeys on a namespace of
// its own: one key holds 90% of a burst, the others one fire each (nSmall
// over 100 keys), every key at rate per 100 ms; 4 dispatchers deliver it
// all. It returns how many of the big key's deliveries came before the
// small keys' p99 one, of how many, that p99 delay, and how long the big
// key took to drain. Each fire counts once, at its first delivery: a lease
// that ran out on a loaded machine delivers it again.
func fairTry(t *testing.T, b *redistest.Backend, nBig, nSmall, rate int) (before, big int, p99, drain time.Duration) {
	t.Helper()
	ctx := context.Background()
	q := newQueue(t, b)
	if err := q.Flows().PutPolicy(ctx, queue.FlowPolicy{Rate: rate, Period: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	sink, url := newFlowSink(t, nil)
	counts := map[string]int{"big": nBig}
	for i := range nSmall {
		counts[fmt.Sprintf("s%03d", i%100)]++
	}
	// The big key's fires go into the stream first.
	fireKeys(t, q, map[string]int{"big": nBig})
	small := map[string]int{}
	for k, n := range counts {
		if k != "big" {
			small[k] = n
		}
	}
	fireKeys(t, q, small)
	stop := runDispatchers(t, q, 4, url)
	defer stop()
	total := func() int {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		n := 0
		for _, at := range sink.at {
			n += len(at)
		}
		return n
	}
	redistest.Eventually(t, 30*time.Second+time.Duration(nBig)*5*time.Millisecond, "every fire delivered", func() bool { return total() >= nBig+nSmall })
	stop()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var delays []time.Duration
	var arrived []time.Time
	for k, d := range sink.delay {
		if k != "big" {
			delays = append(delays, d...)
			arrived = append(arrived, sink.at[k]...)
		}
	}
	slices.Sort(delays)
	slices.SortFunc(arrived, func(a, b time.Time) int { return a.Compare(b) })
	p99i := (len(delays)*99+99)/100 - 1
	bigAt := sink.at["big"]
	slices.SortFunc(bigAt, func(a, b time.Time) int { return a.Compare(b) })
	drain = bigAt[len(bigAt)-1].Sub(bigAt[0])
	// How many of the big key's deliveries came before 99% of the small
	// keys' had arrived: all of them if the small keys queued behind its
	// backlog.
	before, _ = slices.BinarySearchFunc(bigAt, arrived[p99i], func(a, b time.Time) int { return a.Compare(b) })
	t.Logf("small keys: p99 delivery delay %v, max %v, after %d of the big key's %d deliveries; big key drained in %v",
		delays[p99i], delays[len(delays)-1], before, len(bigAt), drain)
	return before, len(bigAt), delays[p99i], drain
}
