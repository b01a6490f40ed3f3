package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/scripts/lua"
)

func debounce(t *testing.T, q *queue.Queue, key string, o queue.DebounceOptions) queue.DebounceResult {
	t.Helper()
	res, err := q.Debounce(context.Background(), key, o)
	if err != nil {
		t.Fatalf("Debounce(%q): %v", key, err)
	}
	return res
}

// claimUntilFired claims until the timer id fired and returns its fire.
func claimUntilFired(t *testing.T, b *redistest.Backend, q *queue.Queue, id string) queue.Fired {
	t.Helper()
	var got *queue.Fired
	redistest.Eventually(t, 10*time.Second, "timer "+id+" to fire", func() bool {
		res, err := q.Engine().Claim(context.Background(), queue.MaxBatch)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		for _, f := range res.Fired {
			if f.ID == id {
				got = &f
			} else {
				t.Fatalf("claim fired %q, not %q", f.ID, id)
			}
		}
		return got != nil
	})
	return *got
}

// The three outcomes, and that each leaves the one timer of the window
// where the result says, by the server's clock.
func TestDebounceOutcomes(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		o := queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Payload: []byte("a")}

		first := debounce(t, q, "user-7", o)
		if first.Outcome != queue.DebounceCreated {
			t.Fatalf("first call: %s, want created", first.Outcome)
		}
		if want := queue.DebounceID("user-7", first.Now.UnixMilli()); first.Timer.ID != want {
			t.Errorf("ID %q, want %q", first.Timer.ID, want)
		}
		if sid, nominal, ok := queue.ParseOccurrenceID(first.Timer.ID); !ok || sid != "user-7" || !nominal.Equal(first.Now) {
			t.Errorf("ParseOccurrenceID(%q) = %q, %v, %v", first.Timer.ID, sid, nominal, ok)
		}
		if !first.Timer.CreatedAt.Equal(first.Now) || first.Timer.State != queue.StateScheduled {
			t.Errorf("timer %+v, call at %v", first.Timer, first.Now)
		}
		if d := first.Timer.Due.Sub(first.Now); d < time.Hour || d > time.Hour+time.Millisecond {
			t.Errorf("due %v after the call, want 1h (rounded up to the ms)", d)
		}
		if !first.Deadline.Equal(first.Now.Add(2 * time.Hour)) {
			t.Errorf("deadline %v, want the call %v + 2h", first.Deadline, first.Now)
		}

		redistest.AwaitServerTime(t, b.Client, first.Now.Add(2*time.Millisecond))
		o.Payload = []byte("b")
		pushed := debounce(t, q, "user-7", o)
		if pushed.Outcome != queue.DebouncePushed || pushed.Timer.ID != first.Timer.ID {
			t.Fatalf("second call: %s %q, want pushed %q", pushed.Outcome, pushed.Timer.ID, first.Timer.ID)
		}
		if !pushed.Timer.Due.After(first.Timer.Due) || pushed.Timer.Due.Sub(pushed.Now) < time.Hour {
			t.Errorf("pushed due %v, first due %v, call at %v", pushed.Timer.Due, first.Timer.Due, pushed.Now)
		}
		if !pushed.Deadline.Equal(first.Deadline) || !pushed.Timer.CreatedAt.Equal(first.Timer.CreatedAt) {
			t.Errorf("a push moved the window: deadline %v (was %v), created %v", pushed.Deadline, first.Deadline, pushed.Timer.CreatedAt)
		}

		// A longer delay reaches past the deadline, fixed by the first
		// call: the MaxWait of later calls does not move it.
		capped := debounce(t, q, "user-7", queue.DebounceOptions{Delay: 3 * time.Hour, MaxWait: 5 * time.Hour, Payload: []byte("c")})
		if capped.Outcome != queue.DebounceCapped || capped.Timer.ID != first.Timer.ID {
			t.Fatalf("third call: %s %q, want capped %q", capped.Outcome, capped.Timer.ID, first.Timer.ID)
		}
		if !capped.Timer.Due.Equal(first.Deadline) || !capped.Deadline.Equal(first.Deadline) {
			t.Errorf("capped due %v, deadline %v, want both %v", capped.Timer.Due, capped.Deadline, first.Deadline)
		}
		got, err := q.Get(ctx, first.Timer.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Due.Equal(first.Deadline) || string(got.Payload) != "c" || got.State != queue.StateScheduled {
			t.Errorf("Get: %+v, want due %v and payload c", got, first.Deadline)
		}
		// One timer, one window string, nothing else.
		keys := nsKeys(t, b, q)
		if len(keys) != 3 { // due, timers, window
			t.Errorf("keys %v, want the due set, the timers hash and the window", keys)
		}
	})
}

// KeepFirst keeps the payload of the call that opened the window while
// later calls move its timer.
func TestDebounceKeepFirstPayload(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		o := queue.DebounceOptions{Delay: time.Minute, MaxWait: time.Hour, Payload: []byte("first"), KeepFirst: true}
		first := debounce(t, q, "k", o)
		redistest.AwaitServerTime(t, b.Client, first.Now.Add(2*time.Millisecond))
		o.Payload = []byte("second")
		res := debounce(t, q, "k", o)
		if res.Outcome != queue.DebouncePushed || string(res.Timer.Payload) != "first" {
			t.Fatalf("got %s with payload %q, want pushed with payload first", res.Outcome, res.Timer.Payload)
		}
		got, err := q.Get(context.Background(), res.Timer.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Payload) != "first" || !got.Due.Equal(res.Timer.Due) {
			t.Errorf("Get: %+v", got)
		}
		// Without KeepFirst, the newest wins.
		o.KeepFirst, o.Payload = false, []byte("third")
		res = debounce(t, q, "k", o)
		if got, _ := q.Get(context.Background(), res.Timer.ID); string(got.Payload) != "third" {
			t.Errorf("payload %q, want third", got.Payload)
		}
	})
}

// A fired window is never re-armed: the next call opens a new window with
// a new ID, later than the old one's; so does a call after a cancel.
func TestDebounceAfterFireCreatesTheNext(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		o := queue.DebounceOptions{Delay: time.Millisecond, MaxWait: time.Hour, Payload: []byte("1")}
		first := debounce(t, q, "order-9", o)
		f := claimUntilFired(t, b, q, first.Timer.ID)
		if f.Due.Before(first.Now.Add(time.Millisecond)) || string(f.Payload) != "1" {
			t.Errorf("fired %+v, call at %v", f, first.Now)
		}

		// The poller hands every fire of this form to ArmFired: a window
		// is no schedule, so nothing is armed and nothing fails.
		if n, err := q.Engine().ArmFired(ctx, []queue.Fired{f}); n != 0 || err != nil {
			t.Errorf("ArmFired of a window's fire: %d, %v", n, err)
		}

		o.Delay, o.Payload = time.Hour, []byte("2")
		next := debounce(t, q, "order-9", o)
		if next.Outcome != queue.DebounceCreated || next.Timer.ID == first.Timer.ID {
			t.Fatalf("after the fire: %s %q, want a new window (not %q)", next.Outcome, next.Timer.ID, first.Timer.ID)
		}
		_, n1, _ := queue.ParseOccurrenceID(first.Timer.ID)
		_, n2, _ := queue.ParseOccurrenceID(next.Timer.ID)
		if !n2.After(n1) {
			t.Errorf("window IDs %q then %q: not growing", first.Timer.ID, next.Timer.ID)
		}
		old, err := q.Get(ctx, first.Timer.ID)
		if err != nil || old.State != queue.StateFired || string(old.Payload) != "1" {
			t.Errorf("the fired window: %+v, %v", old, err)
		}

		if _, err := q.Cancel(ctx, next.Timer.ID); err != nil {
			t.Fatal(err)
		}
		third := debounce(t, q, "order-9", o)
		if third.Outcome != queue.DebounceCreated || third.Timer.ID == next.Timer.ID {
			t.Fatalf("after a cancel: %s %q, want a new window", third.Outcome, third.Timer.ID)
		}
	})
}

// Bad input is refused before anything is written.
func TestDebounceBadInputWritesNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		ok := queue.DebounceOptions{Delay: time.Second, MaxWait: time.Minute}
		with := func(f func(*queue.DebounceOptions)) queue.DebounceOptions { o := ok; f(&o); return o }
		for _, c := range []struct {
			name string
			key  string
			o    queue.DebounceOptions
			want error
		}{
			{"zero delay", "k", with(func(o *queue.DebounceOptions) { o.Delay = 0 }), queue.ErrInvalidOptions},
			{"negative delay", "k", with(func(o *queue.DebounceOptions) { o.Delay = -time.Second }), queue.ErrInvalidOptions},
			{"zero max wait", "k", with(func(o *queue.DebounceOptions) { o.MaxWait = 0 }), queue.ErrInvalidOptions},
			{"negative max wait", "k", with(func(o *queue.DebounceOptions) { o.MaxWait = -time.Minute }), queue.ErrInvalidOptions},
			{"max wait below delay", "k", with(func(o *queue.DebounceOptions) { o.MaxWait = time.Millisecond }), queue.ErrInvalidOptions},
			{"absurd max wait", "k", with(func(o *queue.DebounceOptions) { o.MaxWait = queue.MaxDebounceWait + time.Millisecond }), queue.ErrInvalidOptions},
			{"empty key", "", ok, queue.ErrInvalidID},
			{"long key", strings.Repeat("k", queue.MaxDebounceKeyBytes+1), ok, queue.ErrInvalidID},
			{"control character", "a\nb", ok, queue.ErrInvalidID},
			{"large payload", "k", with(func(o *queue.DebounceOptions) { o.Payload = make([]byte, queue.DefaultMaxPayloadBytes+1) }), queue.ErrPayloadTooLarge},
		} {
			_, err := q.Debounce(ctx, c.key, c.o)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Errorf("refused calls wrote %v", keys)
		}

		// The script checks the arguments again, for a caller that is not
		// this package.
		l := keyspace.Shard(q.Namespace(), 0, 1)
		for _, args := range [][]any{
			{"k", "0", "1000", "", "0", l.Wake()},
			{"k", "-5", "1000", "", "0", l.Wake()},
			{"k", "1000", "999", "", "0", l.Wake()},
			{"k", "1000", "31536000001", "", "0", l.Wake()},
			{"k", "1.5", "1000", "", "0", l.Wake()},
			{"k", "1000", "1e6", "", "0", l.Wake()},
		} {
			err := redis.NewScript(lua.Debounce.Source).Run(ctx, b.Client, lua.Debounce.Keys(l, "k"), args...).Err()
			if err == nil || !strings.Contains(err.Error(), "max wait") {
				t.Errorf("script with %v: %v, want a refusal", args[1:3], err)
			}
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Errorf("refused scripts wrote %v", keys)
		}

		// A key of the wrong type, and a key that is a recurring schedule.
		if err := b.Client.HSet(ctx, l.Debounce("k"), "x", "y").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Debounce(ctx, "k", ok); !errors.Is(err, queue.ErrWrongType) {
			t.Errorf("window key of the wrong type: %v", err)
		}
		if err := b.Client.Del(ctx, l.Debounce("k")).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.Set(ctx, l.Debounce("k"), "garbage", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Debounce(ctx, "k", ok); !errors.Is(err, queue.ErrMalformedRecord) {
			t.Errorf("malformed window: %v", err)
		}
		if err := b.Client.Del(ctx, l.Debounce("k")).Err(); err != nil {
			t.Fatal(err)
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Errorf("refused calls wrote %v", keys)
		}
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "nightly", Every: time.Hour}); err != nil {
			t.Fatal(err)
		}
		before := nsKeys(t, b, q)
		if _, err := q.Debounce(ctx, "nightly", ok); !errors.Is(err, queue.ErrDebounceKeyIsSchedule) || !errors.Is(err, queue.ErrInvalidID) {
			t.Errorf("a schedule's ID as the key: %v", err)
		}
		if after := nsKeys(t, b, q); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("refused call wrote: %v, then %v", before, after)
		}
	})
}

// Many callers race on one key while a claimer runs: each window fires
// exactly once, never before its last call's delay nor after its first
// call's max wait, by the server's clock.
func TestDebounceRace(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		callers, calls := 100, 5
		delay, maxWait := 150*time.Millisecond, 400*time.Millisecond
		if b.Mini != nil {
			// Lua in miniredis runs about a hundred times slower.
			callers = 10
		}
		var mu sync.Mutex
		var results []queue.DebounceResult
		var fired []queue.Fired
		stop := make(chan struct{})
		claimerDone := make(chan struct{})
		// claiming is held by each claim, and by each quiet round below,
		// so that no claim lands inside a round.
		var claiming sync.Mutex
		go func() {
			defer close(claimerDone)
			for {
				claiming.Lock()
				res, err := q.Engine().Claim(ctx, queue.MaxBatch)
				claiming.Unlock()
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				mu.Lock()
				fired = append(fired, res.Fired...)
				mu.Unlock()
				select {
				case <-stop:
					return
				// A poller's pace: the claims interleave with the calls.
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		stopClaimer := sync.OnceFunc(func() { close(stop); <-claimerDone })
		defer stopClaimer()
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range calls {
					res, err := q.Debounce(ctx, "hot", queue.DebounceOptions{Delay: delay, MaxWait: maxWait, Payload: []byte(fmt.Sprintf("%d/%d", c, i))})
					if err != nil {
						t.Errorf("Debounce: %v", err)
						return
					}
					mu.Lock()
					results = append(results, res)
					mu.Unlock()
					if i < calls-1 {
						// Spread each caller's calls over more than one
						// max wait, so windows are pushed, capped, fire
						// and reopen while the others call.
						time.Sleep(time.Duration(c%7+1) * 20 * time.Millisecond)
					}
				}
			}()
		}
		close(start)
		wg.Wait()

		// Then rounds of the callers on a second key, each round after the
		// last one's window fired and well before its deadline: each
		// round opens exactly one new window, which all its calls share.
		// No claim runs during a round: a round outlasts the 30 ms delay
		// when the machine is loaded (at load 20, a mini round's two
		// windows were opened 231 ms apart), and a window that fires mid-round
		// rightly makes the round's later calls open the next one. The
		// claims interleaving with the calls are the first phase's.
		hasFired := func(id string) bool {
			mu.Lock()
			defer mu.Unlock()
			for _, f := range fired {
				if f.ID == id {
					return true
				}
			}
			return false
		}
		var rounds []string
		for r := range 3 {
			var round sync.WaitGroup
			ids := make([]string, callers)
			claiming.Lock()
			for c := range callers {
				round.Add(1)
				go func() {
					defer round.Done()
					res, err := q.Debounce(ctx, "quiet", queue.DebounceOptions{Delay: 30 * time.Millisecond, MaxWait: time.Hour, Payload: []byte(fmt.Sprint(r))})
					if err != nil {
						t.Errorf("Debounce: %v", err)
						return
					}
					ids[c] = res.Timer.ID
					mu.Lock()
					results = append(results, res)
					mu.Unlock()
				}()
			}
			round.Wait()
			claiming.Unlock()
			for _, id := range ids {
				if id != ids[0] {
					t.Fatalf("round %d: windows %q and %q", r, ids[0], id)
				}
			}
			if len(rounds) > 0 && rounds[len(rounds)-1] == ids[0] {
				t.Fatalf("round %d re-armed the fired window %q", r, ids[0])
			}
			rounds = append(rounds, ids[0])
			redistest.Eventually(t, 10*time.Second, "window "+ids[0]+" to fire", func() bool { return hasFired(ids[0]) })
		}

		// Every window's timer is due by its deadline, at most maxWait on.
		windows := map[string][]queue.DebounceResult{}
		for _, r := range results {
			windows[r.Timer.ID] = append(windows[r.Timer.ID], r)
		}
		redistest.Eventually(t, 20*time.Second, "every window to fire", func() bool {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, f := range fired {
				if windows[f.ID] != nil {
					n++
				}
			}
			return n >= len(windows)
		})
		stopClaimer()

		count := map[string]int{}
		for _, f := range fired {
			count[f.ID]++
		}
		for _, f := range fired {
			if count[f.ID] != 1 {
				t.Errorf("%s fired %d times", f.ID, count[f.ID])
			}
			ws := windows[f.ID]
			if ws == nil {
				t.Errorf("%s fired but no call made it", f.ID)
				continue
			}
			var created int
			var last queue.DebounceResult
			for _, r := range ws {
				if r.Outcome == queue.DebounceCreated {
					created++
					if strings.HasPrefix(f.ID, "hot@") && !r.Deadline.Equal(r.Now.Add(maxWait)) {
						t.Errorf("%s: deadline %v, opened %v", f.ID, r.Deadline, r.Now)
					}
				}
				if r.Now.After(last.Now) {
					last = r
				}
				if !r.Deadline.Equal(ws[0].Deadline) {
					t.Errorf("%s: deadlines %v and %v", f.ID, r.Deadline, ws[0].Deadline)
				}
			}
			if created != 1 {
				t.Errorf("%s: created by %d calls", f.ID, created)
			}
			want := last.Now.Add(delay)
			if strings.HasPrefix(f.ID, "quiet@") {
				want = last.Now.Add(30 * time.Millisecond)
			}
			if want.After(last.Deadline) {
				want = last.Deadline
			}
			if f.Due.Before(want) {
				t.Errorf("%s due %v, before its last call %v + delay (or its deadline %v)", f.ID, f.Due, last.Now, last.Deadline)
			}
			if f.Due.After(last.Deadline) {
				t.Errorf("%s due %v, after its deadline %v", f.ID, f.Due, last.Deadline)
			}
			if f.FiredAt.Before(f.Due) {
				t.Errorf("%s fired at %v, before its due time %v", f.ID, f.FiredAt, f.Due)
			}
		}
		if len(count) != len(windows) {
			t.Errorf("%d windows, %d fired", len(windows), len(count))
		}
		if len(windows) < 2 {
			t.Errorf("only %d window(s): the calls never outlasted a max wait, so reopening went untested", len(windows))
		}
		t.Logf("%d calls, %d windows", len(results), len(windows))
	})
}

// A debounced timer may deliver: the endpoint goes with the payload (the
// newest call's, unless KeepFirst), its fire event names it, and the
// opening call's sampled span is the fire's parent. A missing endpoint is
// refused with nothing written, on a new key and on an open window.
func TestDebounceDeliversAndTraces(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		o := queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Payload: []byte("a"), Endpoint: "billing"}
		if _, err := q.Debounce(ctx, "cart", o); !errors.Is(err, queue.ErrEndpointNotFound) || !strings.Contains(err.Error(), `"billing"`) {
			t.Fatalf("debounce to a missing endpoint: %v, want ErrEndpointNotFound naming it", err)
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Fatalf("the refused debounce wrote %v", keys)
		}
		for _, name := range []string{"billing", "audit"} {
			e := billing()
			e.Name = name
			if _, err := q.Endpoints().Put(ctx, e, nil); err != nil {
				t.Fatal(err)
			}
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2}, TraceFlags: trace.FlagsSampled,
		})
		first, err := q.Debounce(trace.ContextWithSpanContext(ctx, sc), "cart", o)
		if err != nil {
			t.Fatal(err)
		}
		k, err := q.Inspect().ShardOf(ctx, first.Timer.ID)
		if err != nil {
			t.Fatal(err)
		}
		n, err := q.Inspect().Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sp := keyspace.Shard(q.Namespace(), k, n)
		endpoint := func() string {
			t.Helper()
			v, err := b.Client.HGet(ctx, sp.Deliveries(), first.Timer.ID).Result()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			return v
		}
		if got := endpoint(); got != "billing" {
			t.Fatalf("after the opening call: endpoint %q, want billing", got)
		}

		// A push to a missing endpoint changes nothing.
		before := nsKeys(t, b, q)
		bad := o
		bad.Endpoint, bad.Payload = "nowhere", []byte("z")
		if _, err := q.Debounce(ctx, "cart", bad); !errors.Is(err, queue.ErrEndpointNotFound) {
			t.Fatalf("push to a missing endpoint: %v", err)
		}
		if got, _ := q.Get(ctx, first.Timer.ID); string(got.Payload) != "a" || !got.Due.Equal(first.Timer.Due) || endpoint() != "billing" {
			t.Fatalf("the refused push changed the window: %+v, endpoint %q", got, endpoint())
		}
		if after := nsKeys(t, b, q); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refused push: keys %v, then %v", before, after)
		}

		// KeepFirst keeps the endpoint with the payload; a push without it
		// sets both, and a push without an endpoint stops the delivery.
		keep := o
		keep.KeepFirst, keep.Endpoint, keep.Payload = true, "audit", []byte("b")
		debounce(t, q, "cart", keep)
		if got := endpoint(); got != "billing" {
			t.Errorf("after a KeepFirst push: endpoint %q, want billing", got)
		}
		plain := o
		plain.Endpoint, plain.Payload = "", []byte("c")
		debounce(t, q, "cart", plain)
		if got := endpoint(); got != "" {
			t.Errorf("after a push without an endpoint: endpoint %q, want none", got)
		}
		last := o
		last.Endpoint, last.Payload, last.Delay = "audit", []byte("d"), time.Millisecond
		res := debounce(t, q, "cart", last)
		if got := endpoint(); got != "audit" {
			t.Errorf("after the last push: endpoint %q, want audit", got)
		}
		claimUntilFired(t, b, q, res.Timer.ID)
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		e := fireEntries(t, b, q)
		if len(e) != 1 || e[0].Values["endpoint"] != "audit" || e[0].Values["payload"] != "d" || e[0].Values["traceparent"] != want {
			t.Fatalf("fire events %v, want one to audit with payload d and traceparent %s", e, want)
		}
	})
}

// RestoreDebounce writes a window's timer that Restore refuses, reopens
// its window only while the deadline is ahead and the key has none of its
// own, and refuses a key that is a schedule here, writing nothing.
func TestRestoreDebounce(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		src := newQueue(t, b, queue.Options{})
		open := debounce(t, src, "cart", queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Payload: []byte("a")})
		w, ok, err := src.Inspect().DebounceWindowOf(ctx, open.Timer.ID)
		if err != nil || !ok || w.Key != "cart" || !w.Deadline.Equal(open.Deadline) || !w.Opened.Equal(open.Now) {
			t.Fatalf("DebounceWindowOf(%q) = %+v, %v, %v; the call gave %+v", open.Timer.ID, w, ok, err, open)
		}
		if _, _, err := src.Recurring().Put(ctx, queue.Recurring{ID: "nightly", Every: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := src.Inspect().DebounceWindowOf(ctx, "nightly@1000"); ok || err != nil {
			t.Fatalf("an occurrence's ID read as a window: %v, %v", ok, err)
		}

		dst := newQueue(t, b, queue.Options{})
		if _, err := dst.Restore(ctx, []queue.Timer{open.Timer}); !errors.Is(err, queue.ErrOccurrenceID) {
			t.Fatalf("Restore of a window's timer: %v, want ErrOccurrenceID", err)
		}
		res, err := dst.RestoreDebounce(ctx, queue.RestoredWindow{Timer: open.Timer, Deadline: w.Deadline})
		if err != nil || !res.Created || !res.Timer.Due.Equal(open.Timer.Due) {
			t.Fatalf("RestoreDebounce: %+v, %v", res, err)
		}
		if got, ok, err := dst.Inspect().DebounceWindowOf(ctx, open.Timer.ID); err != nil || !ok || !got.Deadline.Equal(open.Deadline) {
			t.Fatalf("the restored window: %+v, %v, %v", got, ok, err)
		}
		if res, err := dst.RestoreDebounce(ctx, queue.RestoredWindow{Timer: open.Timer, Deadline: w.Deadline}); err != nil || res.Created {
			t.Fatalf("RestoreDebounce again: %+v, %v, want Created false", res, err)
		}
		pushed := debounce(t, dst, "cart", queue.DebounceOptions{Delay: 3 * time.Hour, MaxWait: 3 * time.Hour})
		if pushed.Outcome != queue.DebounceCapped || pushed.Timer.ID != open.Timer.ID || !pushed.Deadline.Equal(open.Deadline) {
			t.Fatalf("after the restore: %+v, want the window capped at %v", pushed, open.Deadline)
		}

		// A deadline that passed, or a key with a window of its own: the
		// timer is restored, the window is not reopened.
		past := open.Timer
		past.ID = queue.DebounceID("old", 1000)
		if _, err := dst.RestoreDebounce(ctx, queue.RestoredWindow{Timer: past, Deadline: time.UnixMilli(2000)}); err != nil {
			t.Fatal(err)
		}
		if got, _, err := dst.Inspect().DebounceWindowOf(ctx, past.ID); err != nil || !got.Deadline.IsZero() {
			t.Fatalf("a window past its deadline reopened: %+v, %v", got, err)
		}
		second := open.Timer
		second.ID = queue.DebounceID("cart", open.Now.UnixMilli()-5)
		if _, err := dst.RestoreDebounce(ctx, queue.RestoredWindow{Timer: second, Deadline: open.Deadline.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := dst.Inspect().DebounceWindowOf(ctx, open.Timer.ID); !got.Deadline.Equal(open.Deadline) {
			t.Fatalf("the key's own window was replaced: %+v", got)
		}

		// Refusals write nothing.
		if _, _, err := dst.Recurring().Put(ctx, queue.Recurring{ID: "nightly", Every: time.Hour}); err != nil {
			t.Fatal(err)
		}
		before := nsKeys(t, b, dst)
		occ := open.Timer
		occ.ID = queue.DebounceID("nightly", 1000)
		if _, err := dst.RestoreDebounce(ctx, queue.RestoredWindow{Timer: occ, Deadline: open.Deadline}); !errors.Is(err, queue.ErrDebounceKeyIsSchedule) {
			t.Errorf("a schedule's occurrence as a window: %v", err)
		}
		plain := open.Timer
		plain.ID = "plain"
		if _, err := dst.RestoreDebounce(ctx, queue.RestoredWindow{Timer: plain}); !errors.Is(err, queue.ErrInvalidID) {
			t.Errorf("a plain ID as a window: %v", err)
		}
		if after := nsKeys(t, b, dst); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("refused restores wrote: %v, then %v", before, after)
		}
		if _, err := dst.Get(ctx, occ.ID); !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("the refused window's timer: %v, want ErrNotFound", err)
		}
	})
}

// RecurringTimers.Put and RecurringTimers.Restore refuse the name of a debounce key with
// an open window, writing nothing, as Debounce refuses a schedule's ID.
func TestPutRecurringRefusesOpenDebounceKey(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		debounce(t, q, "cart", queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour})
		before := nsKeys(t, b, q)
		_, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "cart", Every: time.Minute})
		if !errors.Is(err, queue.ErrScheduleIDIsDebounceKey) || !errors.Is(err, queue.ErrInvalidID) {
			t.Fatalf("PutRecurring of an open debounce key: %v", err)
		}
		if _, err := q.Recurring().Restore(ctx, queue.RecurringInfo{Recurring: queue.Recurring{ID: "cart", Every: time.Minute, Anchor: time.Now()},
			State: queue.RecurringActive, CreatedAt: time.Now(), UpdatedAt: time.Now()}); !errors.Is(err, queue.ErrScheduleIDIsDebounceKey) {
			t.Fatalf("RestoreRecurring of an open debounce key: %v", err)
		}
		if _, err := q.Recurring().Get(ctx, "cart"); !errors.Is(err, queue.ErrRecurringNotFound) {
			t.Fatalf("the refused schedule: %v", err)
		}
		if after := nsKeys(t, b, q); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refused puts wrote: %v, then %v", before, after)
		}
		// Another name is fine.
		if _, created, err := q.Recurring().Put(ctx, queue.Recurring{ID: "nightly", Every: time.Hour}); err != nil || !created {
			t.Fatalf("PutRecurring: %v, %v", created, err)
		}
	})
}
