package timerqtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/timerq/timerq/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start is a fixed server time, so failure messages can be compared whole.
var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newAt(t *testing.T, opts queue.Options) *Env {
	t.Helper()
	env := New(t, opts)
	env.SetTime(start)
	return env
}

func TestNewStartsAtTheWallClock(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	env := New(t, queue.Options{})
	after := time.Now()
	if now := env.Now(); now.Before(before) || now.After(after) || now.Location() != time.UTC {
		t.Fatalf("Now() = %v, want the wall clock between %v and %v, in UTC", now, before, after)
	}
}

// The clock the scripts read (Redis TIME) is the Env's, and it stands
// still until the test moves it.
func TestAdvanceMovesTheServerClock(t *testing.T) {
	env := newAt(t, queue.Options{})
	ctx := t.Context()
	serverTime := func() time.Time {
		t.Helper()
		now, err := env.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now.UTC()
	}
	if got := serverTime(); !got.Equal(start) {
		t.Fatalf("server TIME = %v, want %v", got, start)
	}
	if got := env.Advance(90 * time.Minute); !got.Equal(start.Add(90 * time.Minute)) {
		t.Fatalf("Advance returned %v", got)
	}
	if got := serverTime(); !got.Equal(start.Add(90 * time.Minute)) {
		t.Fatalf("server TIME after Advance(90m) = %v, want %v", got, start.Add(90*time.Minute))
	}
	if !env.Now().Equal(start.Add(90 * time.Minute)) {
		t.Fatalf("Now() = %v", env.Now())
	}
	// A relative schedule counts from the server clock, not the host's.
	res, err := env.Queue.ScheduleIn(ctx, "a", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := start.Add(91 * time.Minute); !res.Timer.Due.Equal(want) {
		t.Fatalf("ScheduleIn(1m) due %v, want %v", res.Timer.Due, want)
	}
}

func TestFireDueFiresOnlyWhatIsDue(t *testing.T) {
	env := newAt(t, queue.Options{})
	ctx := t.Context()
	if _, err := env.Queue.ScheduleIn(ctx, "order-42", 30*time.Minute, []byte("42")); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Queue.ScheduleIn(ctx, "later", time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	env.Advance(30*time.Minute - time.Millisecond)
	if fired := env.FireDue(t); len(fired) != 0 {
		t.Fatalf("FireDue 1 ms before the due time fired %v", fired)
	}
	RequireScheduled(t, env.Queue, "order-42", &RequireScheduledOpts{Due: start.Add(30 * time.Minute), Payload: []byte("42")})

	env.Advance(time.Millisecond)
	fired := env.FireDue(t)
	if len(fired) != 1 || fired[0].ID != "order-42" || string(fired[0].Payload) != "42" ||
		!fired[0].FiredAt.Equal(start.Add(30*time.Minute)) || fired[0].Lateness() != 0 {
		t.Fatalf("FireDue at the due time = %+v, want order-42 fired on time", fired)
	}
	RequireFired(t, env.Queue, "order-42")
	RequireNotScheduled(t, env.Queue, "order-42")
	RequireScheduled(t, env.Queue, "later", nil)
	if fired := env.FireDue(t); len(fired) != 0 {
		t.Fatalf("a second FireDue fired %v again", fired)
	}
}

// FireDue claims until nothing is due, however many claims that takes.
func TestFireDueFiresMoreThanOneClaim(t *testing.T) {
	env := newAt(t, queue.Options{})
	const n = 2*queue.MaxBatch + 7
	timers := make([]queue.NewTimer, n)
	for i := range timers {
		timers[i] = queue.NewTimer{ID: fmt.Sprintf("t%04d", i), Due: start.Add(time.Duration(i) * time.Millisecond)}
	}
	if _, err := env.Queue.ScheduleBatch(t.Context(), timers); err != nil {
		t.Fatal(err)
	}
	env.Advance(time.Hour)
	fired := env.FireDue(t)
	if len(fired) != n {
		t.Fatalf("FireDue fired %d timers, want %d", len(fired), n)
	}
	seen := map[string]bool{}
	for _, f := range fired {
		if seen[f.ID] {
			t.Fatalf("%s fired twice", f.ID)
		}
		seen[f.ID] = true
	}
}

// A waiter in another goroutine sees a fire made by FireDue.
func TestWaitSeesFireDue(t *testing.T) {
	env := newAt(t, queue.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := env.Queue.ScheduleIn(ctx, "sleep", time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- env.Queue.Wait(ctx, "sleep") }()
	env.Advance(time.Hour)
	if fired := env.FireDue(t); len(fired) != 1 {
		t.Fatalf("FireDue = %v", fired)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v, want nil once FireDue fired the timer", err)
	}
}

// A Consume handler sees a fire made by FireDue, through the fire stream.
func TestConsumeSeesFireDue(t *testing.T) {
	env := newAt(t, queue.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := env.Queue.ScheduleIn(ctx, "order-7", 10*time.Minute, []byte("7")); err != nil {
		t.Fatal(err)
	}
	events := make(chan queue.Event, 10)
	consumed := make(chan error, 1)
	go func() {
		consumed <- env.Queue.Consume(ctx, "shop", "c1", func(_ context.Context, ev queue.Event) error {
			events <- ev
			return nil
		}, queue.ConsumeOptions{})
	}()
	env.Advance(10 * time.Minute)
	env.FireDue(t)
	select {
	case ev := <-events:
		if ev.ID != "order-7" || string(ev.Payload) != "7" || !ev.FiredAt.Equal(start.Add(10*time.Minute)) {
			t.Fatalf("handler got %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("the handler never saw the fire")
	}
	cancel()
	if err := <-consumed; err != nil {
		t.Fatal(err)
	}
}

// FireDue arms what follows a recurring schedule's occurrence, as a
// poller does, so an hourly schedule fires every hour for as long as the
// test advances the clock.
func TestFireDueKeepsRecurringSchedulesGoing(t *testing.T) {
	env := newAt(t, queue.Options{})
	ctx := t.Context()
	if _, _, err := env.Queue.Recurring().Put(ctx, queue.Recurring{ID: "hourly", Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for hour := 1; hour <= 5; hour++ {
		env.Advance(time.Hour)
		fired := env.FireDue(t)
		if len(fired) != 1 {
			t.Fatalf("hour %d: FireDue fired %v, want one occurrence", hour, fired)
		}
		sid, nominal, ok := queue.ParseOccurrenceID(fired[0].ID)
		if !ok || sid != "hourly" || !nominal.Equal(start.Add(time.Duration(hour)*time.Hour)) {
			t.Fatalf("hour %d: fired %s, want the occurrence of hourly at %v", hour, fired[0].ID, start.Add(time.Duration(hour)*time.Hour))
		}
	}
}

// After a long Advance, arming catches up with occurrences already due;
// FireDue fires those too, so nothing due is left behind.
func TestFireDueFiresCatchUpOccurrences(t *testing.T) {
	env := newAt(t, queue.Options{})
	ctx := t.Context()
	if _, _, err := env.Queue.Recurring().Put(ctx, queue.Recurring{ID: "hourly", Every: time.Hour, CatchUp: queue.CatchUpAll, CatchUpLimit: 3}); err != nil {
		t.Fatal(err)
	}
	env.Advance(10*time.Hour + time.Minute)
	fired := env.FireDue(t)
	if len(fired) < 3 {
		t.Fatalf("FireDue after 10 h fired %d occurrences, want the 2 armed and the caught-up ones", len(fired))
	}
	res, err := env.Queue.Engine().Claim(ctx, queue.MaxBatch)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fired) != 0 {
		t.Fatalf("after FireDue a claim still fired %v", res.Fired)
	}
	if !res.NextDue.After(env.Now()) {
		t.Fatalf("next due %v is not after now %v", res.NextDue, env.Now())
	}
}

func TestFireDueOnAShardedNamespace(t *testing.T) {
	env := newAt(t, queue.Options{Shards: 4})
	if n, err := env.Queue.Inspect().Shards(t.Context()); err != nil || n != 4 {
		t.Fatalf("Shards() = %d, %v; want the namespace created with 4", n, err)
	}
	for i := range 20 {
		// Plain timers only: an occurrence-shaped ID ("t@1000") is refused
		// for a plain timer (queue.ErrOccurrenceID).
		if _, err := env.Queue.ScheduleIn(t.Context(), fmt.Sprintf("t%d", i), time.Second, nil); err != nil {
			t.Fatal(err)
		}
	}
	env.Advance(time.Second)
	if fired := env.FireDue(t); len(fired) != 20 {
		t.Fatalf("FireDue on 4 shards fired %d, want 20", len(fired))
	}
	RequireFired(t, env.Queue, "t7")
}

// fakeT records what an assertion reports instead of failing the test.
type fakeT struct {
	*testing.T
	errors []string
	fatal  bool
	failed bool
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
	f.fatal, f.failed = true, true
}
func (f *fakeT) FailNow() { f.failed = true }

func (f *fakeT) message(t *testing.T) string {
	t.Helper()
	if !f.failed || len(f.errors) != 1 {
		t.Fatalf("want one failure reported, got failed=%v errors=%q", f.failed, f.errors)
	}
	return f.errors[0]
}

func (f *fakeT) passed(t *testing.T) {
	t.Helper()
	if f.failed || len(f.errors) > 0 {
		t.Fatalf("want no failure, got %q", f.errors)
	}
}

func TestAssertionFailures(t *testing.T) {
	env := newAt(t, queue.Options{Namespace: "shop"})
	ctx := t.Context()
	q := env.Queue
	for _, id := range []string{"order-42", "fired", "cancelled"} {
		if _, err := q.ScheduleIn(ctx, id, 30*time.Minute, []byte("p-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.FireNow(ctx, "fired"); err != nil { // due now: the next claim fires it
		t.Fatal(err)
	}
	if fired := env.FireDue(t); len(fired) != 1 {
		t.Fatalf("FireDue after FireNow = %v", fired)
	}
	if _, err := q.Cancel(ctx, "cancelled"); err != nil {
		t.Fatal(err)
	}
	env.Advance(10 * time.Minute)
	due := start.Add(30 * time.Minute)

	cases := []struct {
		name string
		run  func(tb testingT)
		want string // the whole message, or "" for a pass
	}{
		{"scheduled passes", func(tb testingT) {
			requireScheduled(tb, q, "order-42", &RequireScheduledOpts{Due: due, Payload: []byte("p-order-42")})
		}, ""},
		{"scheduled with nil opts passes", func(tb testingT) { requireScheduled(tb, q, "order-42", nil) }, ""},
		{"scheduled: missing", func(tb testingT) { requireScheduled(tb, q, "order-43", nil) },
			`timerqtest: timer "order-43" does not exist in namespace "shop" (never scheduled, or purged), want scheduled`},
		{"scheduled: fired", func(tb testingT) { requireScheduled(tb, q, "fired", nil) },
			`timerqtest: timer "fired" is fired, due 2030-01-02T03:04:05.000Z (10m0s ago by the server clock, now 2030-01-02T03:14:05.000Z), fired 2030-01-02T03:04:05.000Z, want scheduled`},
		{"scheduled: cancelled", func(tb testingT) { requireScheduled(tb, q, "cancelled", nil) },
			`timerqtest: timer "cancelled" is cancelled, due 2030-01-02T03:34:05.000Z (in 20m0s by the server clock, now 2030-01-02T03:14:05.000Z), cancelled 2030-01-02T03:04:05.000Z, want scheduled`},
		{"scheduled: wrong due and payload", func(tb testingT) {
			requireScheduled(tb, q, "order-42", &RequireScheduledOpts{Due: due.Add(time.Minute), Payload: []byte("x")})
		}, `timerqtest: timer "order-42" is scheduled, due 2030-01-02T03:34:05.000Z (in 20m0s by the server clock, now 2030-01-02T03:14:05.000Z); want due 2030-01-02T03:35:05.000Z; want payload "x"`},
		{"scheduled: empty payload wanted", func(tb testingT) {
			requireScheduled(tb, q, "order-42", &RequireScheduledOpts{Payload: []byte{}})
		}, `timerqtest: timer "order-42" is scheduled, due 2030-01-02T03:34:05.000Z (in 20m0s by the server clock, now 2030-01-02T03:14:05.000Z); want payload ""`},
		{"scheduled: sub-microsecond due rounds up as timerq does", func(tb testingT) {
			requireScheduled(tb, q, "order-42", &RequireScheduledOpts{Due: due.Add(-time.Nanosecond)})
		}, ""},
		{"not scheduled: missing passes", func(tb testingT) { requireNotScheduled(tb, q, "order-43") }, ""},
		{"not scheduled: fired passes", func(tb testingT) { requireNotScheduled(tb, q, "fired") }, ""},
		{"not scheduled: cancelled passes", func(tb testingT) { requireNotScheduled(tb, q, "cancelled") }, ""},
		{"not scheduled: scheduled", func(tb testingT) { requireNotScheduled(tb, q, "order-42") },
			`timerqtest: timer "order-42" is scheduled, due 2030-01-02T03:34:05.000Z (in 20m0s by the server clock, now 2030-01-02T03:14:05.000Z), want it not scheduled`},
		{"fired passes", func(tb testingT) { requireFired(tb, q, "fired") }, ""},
		{"fired: scheduled in the future", func(tb testingT) { requireFired(tb, q, "order-42") },
			`timerqtest: timer "order-42" is scheduled, due 2030-01-02T03:34:05.000Z (in 20m0s by the server clock, now 2030-01-02T03:14:05.000Z), want fired; Env.Advance the clock past its due time, then call Env.FireDue`},
		{"fired: cancelled", func(tb testingT) { requireFired(tb, q, "cancelled") },
			`timerqtest: timer "cancelled" is cancelled, due 2030-01-02T03:34:05.000Z (in 20m0s by the server clock, now 2030-01-02T03:14:05.000Z), cancelled 2030-01-02T03:04:05.000Z, want fired`},
		{"fired: missing", func(tb testingT) { requireFired(tb, q, "order-43") },
			`timerqtest: timer "order-43" does not exist in namespace "shop" (never scheduled, or purged), want fired`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeT{T: t}
			c.run(f)
			if c.want == "" {
				f.passed(t)
				return
			}
			if got := f.message(t); got != c.want {
				t.Fatalf("message\n got: %s\nwant: %s", got, c.want)
			}
		})
	}

	// A timer due now but not yet fired: the hint is to call FireDue.
	env.Advance(20 * time.Minute)
	f := &fakeT{T: t}
	requireFired(f, q, "order-42")
	if msg := f.message(t); !strings.HasSuffix(msg, "(now by the server clock, now 2030-01-02T03:34:05.000Z), want fired; call Env.FireDue to fire what is due") {
		t.Fatalf("message %q does not say to call FireDue", msg)
	}
	f = &fakeT{T: t}
	requireNotScheduled(f, q, "order-42")
	if msg := f.message(t); !strings.HasSuffix(msg, "want it not scheduled; it is due: call Env.FireDue to fire it") {
		t.Fatalf("message %q does not say to call FireDue", msg)
	}
}

func TestRedisErrorsFailTheTest(t *testing.T) {
	env := newAt(t, queue.Options{})
	if _, err := env.Queue.ScheduleIn(t.Context(), "a", 0, nil); err != nil {
		t.Fatal(err)
	}
	env.Miniredis.SetError("LOADING Redis is loading the dataset in memory")
	defer env.Miniredis.SetError("")
	for name, run := range map[string]func(testingT){
		"FireDue":             func(tb testingT) { env.fireDue(tb) },
		"RequireScheduled":    func(tb testingT) { requireScheduled(tb, env.Queue, "a", nil) },
		"RequireNotScheduled": func(tb testingT) { requireNotScheduled(tb, env.Queue, "a") },
		"RequireFired":        func(tb testingT) { requireFired(tb, env.Queue, "a") },
	} {
		f := &fakeT{T: t}
		run(f)
		if !f.fatal || !strings.Contains(f.message(t), "LOADING") {
			t.Errorf("%s with Redis failing: fatal=%v errors=%q, want one fatal naming the Redis error", name, f.fatal, f.errors)
		}
	}
}

func TestNewWithInvalidOptionsFailsTheTest(t *testing.T) {
	f := &fakeT{T: t}
	if env := newEnv(f, queue.Options{Namespace: "no spaces"}); env != nil {
		t.Fatal("newEnv returned an Env for invalid options")
	}
	msg := f.message(t)
	if !f.fatal || !strings.Contains(msg, "timerqtest.New") || !strings.Contains(msg, "invalid namespace") {
		t.Fatalf("got fatal=%v %q", f.fatal, msg)
	}
}
