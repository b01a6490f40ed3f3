// Package timerqtest tests code that uses timerq, in process and without
// waiting: it runs a queue on an embedded miniredis whose clock the test
// moves by hand.
//
// timerq's scripts read one clock, the Redis server's TIME, to decide what
// is due. New starts a miniredis, sets its clock, and gives a
// *queue.Queue on it. The clock then stands still until the test moves it
// with Env.Advance (or Env.SetTime). Env.FireDue does what a poller would
// do at that instant: it fires every timer that is due, arms the next
// occurrences of recurring schedules, and returns what fired. There is no
// poller goroutine, so nothing fires behind the test's back, and no test
// sleeps to let time pass:
//
//	env := timerqtest.New(t, queue.Options{})
//	env.Queue.ScheduleIn(ctx, "order-42", 30*time.Minute, nil)
//
//	env.Advance(29 * time.Minute)
//	if fired := env.FireDue(t); len(fired) != 0 { ... }   // not yet
//	timerqtest.RequireScheduled(t, env.Queue, "order-42", nil)
//
//	env.Advance(time.Minute)
//	fired := env.FireDue(t)                                // order-42
//	timerqtest.RequireFired(t, env.Queue, "order-42")
//
// FireDue takes the place of a worker: do not run a poller.Poller (or a
// timerworker) on an Env's queue, or it will fire timers behind the test's
// back.
//
// A fire made by FireDue is a real one, made by the same claim script a
// worker runs: the timer's record turns fired, the fire stream gets its
// entry and the timer's channel its wakeup. So code under test that reacts
// to fires through Queue.Wait, Queue.SleepUntil or Queue.Consume sees them
// as it would in production; those calls run in their own goroutines and
// see a fire shortly after FireDue returns, so synchronise on what they do
// (a channel the handler writes to), not on time.
//
// What the clock does not drive: client-side timers. Consume's retry
// delays (ConsumeOptions.RetryDelay) and polling, Wait's RecheckInterval
// and context deadlines run on the real clock. A reclaim needs both: the
// delivery idle for ClaimIdle by the server clock (Advance), then
// Consume's next pass. Advance does not purge settled records either;
// call queue.Engine.Purge after it for that.
//
// The assertions RequireScheduled, RequireNotScheduled and RequireFired
// read a timer's record and fail the test with what they found: the ID,
// the state, the due time and how far it is from the server's clock.
//
// timerqtest runs on miniredis, which implements the commands and Lua
// timerq uses but is not Redis: timerq's own suite runs every behaviour on
// real Redis too. Use timerqtest to test your code, not timerq.
package timerqtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// Env is a queue on an in-process miniredis with a clock the test controls.
// Create it with New. Its methods may be called from several goroutines,
// but the clock is one per Env: tests running in parallel each need their
// own Env.
type Env struct {
	// Queue is a queue on the Env's miniredis with the Options given to
	// New. It is closed when the test ends.
	Queue *queue.Queue
	// Client is the Redis client of Queue (Queue.Client()), for code under
	// test that takes one. It is closed when the test ends. It has no read
	// timeout and never retries a command (the contexts of the calls bound
	// them): miniredis is slow under -race, and a retried claim would fire
	// timers whose fires no caller sees.
	Client redis.UniversalClient
	// Miniredis is the embedded server, for what the Env does not cover
	// (inspecting keys, injecting errors with SetError). Move its clock
	// through the Env, not with Miniredis.SetTime, or Now goes wrong.
	Miniredis *miniredis.Miniredis

	mu  sync.Mutex
	now time.Time
}

// maxFireRounds bounds FireDue's claim-and-arm rounds, so that a recurring
// schedule that keeps arming occurrences already due cannot spin forever.
const maxFireRounds = 10_000

// New starts a miniredis for the test and returns an Env whose Queue has
// opts. The server clock starts at the wall clock's current time,
// truncated to the millisecond, so that code which schedules with
// time.Now().Add(d) behaves as it would in production; from then on the
// clock moves only with Advance and SetTime. Everything is closed when tb
// ends (tb.Cleanup). Options.Shards above 1 creates the namespace with
// that many shards (queue.CreateNamespace). Invalid opts fail the test.
func New(tb testing.TB, opts queue.Options) *Env {
	tb.Helper()
	return newEnv(tb, opts)
}

func newEnv(tb testingTB, opts queue.Options) *Env {
	tb.Helper()
	m := miniredis.RunT(tb) // closed last: cleanups run in reverse order
	// Key TTLs follow the same clock, so nothing decays by wall time.
	m.ClockTTL(true)
	e := &Env{Miniredis: m}
	e.SetTime(time.Now())
	rdb := redis.NewClient(newClientOptions(m.Addr()))
	tb.Cleanup(func() { _ = rdb.Close() })
	q, err := queue.New(rdb, opts)
	if err != nil {
		tb.Fatalf("timerqtest.New: %v", err)
		return nil
	}
	tb.Cleanup(func() { _ = q.Close() })
	if opts.Shards > 1 {
		// A sharded namespace exists only once created.
		ctx, cancel := testContext(tb)
		defer cancel()
		if _, err := queue.CreateNamespace(ctx, rdb, q.Namespace(), opts.Shards); err != nil {
			tb.Fatalf("timerqtest.New: %v", err)
			return nil
		}
	}
	e.Queue, e.Client = q, rdb
	return e
}

// Now is the server clock: the instant the scripts read as "now" (Redis
// TIME), in UTC.
func (e *Env) Now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

// Advance moves the server clock by d and returns the new time. It fires
// nothing by itself: call FireDue, as a poller would run a claim. A
// negative d moves the clock back, as a server clock stepping back would.
func (e *Env) Advance(d time.Duration) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
	e.Miniredis.SetTime(e.now)
	return e.now
}

// SetTime sets the server clock to t, truncated to the millisecond (the
// resolution of timerq's clock). Like Advance, it fires nothing by itself.
func (e *Env) SetTime(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = t.UTC().Truncate(time.Millisecond)
	e.Miniredis.SetTime(e.now)
}

// FireDue fires every timer due by the server clock and returns them, in
// the order they fired (by due time within each claim). It does what a
// poller does at this instant, without a goroutine: it claims until
// nothing is due, and after each claim that fired occurrences of recurring
// schedules it arms what follows them (queue.Engine.ArmFired), claiming again
// any occurrence that arming made due at once (a catch-up after a long
// Advance). A Redis error fails the test.
//
// Each fire is the claim script's, as in production: the record turns
// fired, the fire stream gets an entry for Consume, and the timer's
// channel a wakeup for Wait and SleepUntil.
func (e *Env) FireDue(tb testing.TB) []queue.Fired {
	tb.Helper()
	return e.fireDue(tb)
}

func (e *Env) fireDue(tb testingT) []queue.Fired {
	tb.Helper()
	ctx, cancel := testContext(tb)
	defer cancel()
	shards, err := e.Queue.Inspect().Shards(ctx)
	if err != nil {
		tb.Fatalf("timerqtest: FireDue: %v", err)
		return nil
	}
	var all []queue.Fired
	for range maxFireRounds {
		res, err := e.Queue.Engine().Claim(ctx, queue.MaxBatch)
		if err != nil {
			tb.Fatalf("timerqtest: FireDue: %v", err)
			return all
		}
		if len(res.Fired) == 0 {
			return all
		}
		all = append(all, res.Fired...)
		// Recurring schedules live in unsharded namespaces only; a
		// sharded one has no occurrences to arm (a poller skips it too).
		if shards == 1 {
			if _, err := e.Queue.Engine().ArmFired(ctx, res.Fired); err != nil {
				tb.Fatalf("timerqtest: FireDue: %v", err)
				return all
			}
		}
	}
	tb.Fatalf("timerqtest: FireDue: timers kept coming due after %d claims of up to %d; "+
		"is a recurring schedule catching up without a limit?", maxFireRounds, queue.MaxBatch)
	return all
}

// newClientOptions are the options of an Env's client. miniredis runs Lua
// in a Go interpreter, about a hundred times slower than Redis under
// -race, so one claim of queue.MaxBatch timers can outlast go-redis's
// default 5 s read timeout on a loaded machine. go-redis then sends the
// command again: the first claim has fired its timers in the server, and
// its reply, the only place FireDue learns of them, is gone, so FireDue
// would return fewer timers than fired. So the client has no read timeout
// of its own (the caller's context bounds each call: FireDue's testContext,
// the code under test's own) and never re-sends a command, which on an
// in-process server only ever repeats a command that may have run.
func newClientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ReadTimeout:           -1, // none: see above
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // never re-send
	}
}

// testContext is the context of tb (testing.TB.Context, which ends with
// the test) bounded to a minute, so that a stuck Redis call fails the test
// instead of hanging it.
func testContext(tb testingT) (context.Context, context.CancelFunc) {
	ctx := context.Background()
	if c, ok := tb.(interface{ Context() context.Context }); ok {
		ctx = c.Context()
	}
	return context.WithTimeout(ctx, time.Minute)
}
