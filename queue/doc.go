// Package queue is the client side of timerq: it schedules, inspects,
// cancels, reschedules and waits on durable timers kept in Redis.
//
// This comment is the package's manual: what a timer is, what timerq
// guarantees and where those guarantees end, and how to wait, consume,
// recur, shard and test. docs/guarantees.md gives the proofs (the tests
// that check each guarantee) and docs/redis-layout.md the keys.
//
// # The model
//
// A timer is an ID, a due time and a payload of up to
// Options.MaxPayloadBytes. It lives in Redis, in a namespace
// (Options.Namespace), and nowhere else: a Queue keeps no state of its
// own, and neither do the workers that fire timers. A timer is in one of
// three states: StateScheduled, then StateFired or StateCancelled, which
// are final.
//
// An application schedules with Schedule, ScheduleIn, ScheduleBatch or
// SleepUntil. A worker fires: cmd/timerworker, or a poller.Poller run in
// the application's own process, claims due timers with Engine.Claim, one
// atomic Lua script that moves each due timer to fired, appends a fire
// event to the namespace's stream and publishes a wakeup on the timer's
// channel. The application learns of a fire by Wait (one timer, in
// process), Consume (every fire, through a consumer group) or Get
// (polling). Cancel, Reschedule and FireNow change a scheduled timer; List,
// Stats and Inspector.Counters show the namespace.
//
//	q, err := queue.New(rdb, queue.Options{Namespace: "orders"})
//	...
//	_, err = q.ScheduleIn(ctx, "order-42", 30*time.Minute, []byte("expire"))
//
// Settled (fired or cancelled) records stay readable for Options.Retention
// (7 days by default, KeepForever keeps them); the poller's maintenance
// then purges them.
//
// # Guarantees and their limits
//
// Never early. A timer fires when its due time is at or before the Redis
// server's clock (TIME, read inside the claim script, floored to the
// millisecond); no client clock is consulted, and CreatedAt, FiredAt and
// CancelledAt are server times too. Due times are stored in milliseconds
// and a due time between two milliseconds is rounded up, so a timer is
// never early, at the cost of at most 1 ms of lateness. Relative delays
// (ScheduleIn, RescheduleIn, NewTimerIn, NewTimer.In) are added to the
// server's clock by the script, so a client whose clock is off still gets
// a timer due d after Redis created it; Schedule(ctx, id,
// time.Now().Add(d), …) trusts the caller's clock instead. Limit: "early"
// is by the Redis primary's clock. If it jumps forward (an NTP step, a
// failover to a host whose clock is ahead), timers fire early by the jump.
//
// Exactly once. Redis runs a script to completion before any other
// command, so of any number of racing claimers exactly one fires a given
// timer: it leaves the due set, turns fired, gets one stream entry and one
// wakeup. A worker killed at any instant either ran the claim (the timer
// fired, whether or not the reply arrived) or did not (the next claim
// fires it). Limits:
//   - Persistence. With appendonly yes and appendfsync always, a timer
//     whose Schedule returned survives a Redis crash. With the default
//     everysec, a crash of the Redis host can lose about the last second of
//     writes: schedules (the timer is lost) and claims (the timer fires a
//     second time after the restart). Without persistence a restart loses
//     everything.
//   - Failover. Replication is asynchronous: a failover can lose the last
//     acknowledged writes, so across a failover firing is at least once,
//     and a schedule not yet replicated can be lost. A planned failover
//     that pauses writes until the replica has caught up keeps every
//     guarantee (docs/security.md). A fire seen on the old master may then
//     be seen again, as a second event, on the new one. The namespace's
//     replicas setting (SetReplicas) closes this for an unplanned failover
//     too: a fire becomes visible, and Schedule returns, only once that
//     many replicas have it (otherwise ErrNotReplicated), at the price of
//     a WAIT per claim and per schedule call, and of firing nothing while
//     a master has too few replicas (docs/guarantees.md).
//   - Side effects. Exactly once is about the firing. What a consumer does
//     on a fire event is at least once (it may crash after acting and
//     before acknowledging): deduplicate side effects by timer ID.
//
// Durable. The due set and the records are the only state. A timer that
// came due while every worker was down is still due, and the first claim
// after a restart fires it (late, never lost).
//
// Idempotent. Schedule creates a timer only when its ID has no record: an
// ID that exists in any state returns the existing record with Created
// false and changes nothing, and a fired timer is never re-armed. Limit:
// idempotency lasts as long as the record, that is until Options.Retention
// after the timer settled; then the ID may be scheduled anew. Replays must
// come within the retention, or use KeepForever.
//
// Nothing half-done. Every call leaves each timer fully changed or
// untouched. Arguments are validated before Redis is contacted, and every
// script reads and checks, then probes each write in a form that changes
// nothing (so an ACL or memory refusal comes before any change), then
// publishes, then writes. A refusal wraps ErrPermission (naming the
// missing right and the ACL rule that grants it) or ErrOutOfMemory. Under
// memory pressure, schedule, cancel and reschedule are refused while
// claims keep firing and purges keep freeing memory. Limits: a PUBLISH
// cannot be probed, so a user allowed some timers' channels and not others
// can send some wakeups of a claim that then fails and changes nothing
// (waiters treat wakeups as hints and re-read the record); and
// ScheduleBatch is all or nothing per script call of up to 500 timers, not
// for the whole batch (retry it: it is idempotent by ID).
//
// Counted. The claim script adds each batch it fires to the namespace's
// counters (Inspector.Counters) in the same atomic step, so the counts are
// exactly what fired, whichever worker claimed and whether or not its reply
// arrived; they share the claims' fate in a crash or failover.
//
// Round trips keep everything. Restore (timerctl export, then import)
// brings back each timer with its state, times and payload; a fired timer
// is restored fired and never fires again; a debounce window's timer is
// restored with its window (RestoreDebounce). The export is not an atomic
// snapshot, and the fire stream, consumer groups and dead letters are not
// exported.
//
// # IDs and replay
//
// The caller chooses every timer's ID (1-256 bytes of UTF-8 without
// control characters, ValidateID), and the ID is what makes a timer safe
// to schedule twice. A workflow that sleeps derives the ID from what it
// is doing, not from the moment: DeriveID(executionID, step) gives the
// same 36-character ID on every replay, so a re-run after a crash finds its
// timer, scheduled or already fired, instead of arming a second one:
//
//	id := queue.DeriveID(run.ID, 3) // the third sleep of this run
//	err := q.SleepUntil(ctx, id, due, nil) // returns at once once fired
//
// Schedule's due time and payload do not overwrite an existing timer's:
// use Reschedule to move a timer, and Cancel then Schedule with another
// ID to replace one.
//
// # Waiting and consuming
//
// Wait blocks until one timer fires (nil), is cancelled (ErrCancelled) or
// does not exist (ErrNotFound). It subscribes to the timer's channel, then
// reads the record, so a fire cannot slip between the two. Pub/sub is a
// hint and the record is the truth: the record is read again on every
// message, after every resubscription and every Options.RecheckInterval,
// so a lost message delays a waiter by at most that interval and a stray
// one ends nothing. All waiters of a Queue share one pub/sub connection.
// Wait suits a process that waits for its own timers; the process must be
// running when the timer fires, or must call Wait again (it returns at
// once for a fired timer).
//
// Consume suits work that must happen for every fire, whoever scheduled it:
// it delivers the fire stream to a handler through a Redis consumer group,
// acknowledging an event only after the handler returns nil. Delivery is at
// least once: a consumer that dies mid-handler leaves the event pending,
// and another consumer of the group reclaims it after
// ConsumeOptions.ClaimIdle. A failing handler is retried with backoff, and
// after ConsumeOptions.MaxAttempts deliveries the event goes to the
// dead-letter stream (Deliveries.DeadLetters, Deliveries.Requeue). The
// stream is bounded by Options.StreamMaxLen, so a group that falls that far
// behind misses the oldest events. Deduplicate side effects by Event.ID.
//
// Lease is Consume for a consumer that holds no connection between calls,
// such as an HTTP client behind stateless API replicas (package api): it
// hands out a batch of events, each under a lease, to be settled with Ack,
// Release (retry after a delay, or dead-letter) or ExtendLease. Retries and
// dead letters follow Consume's rules, but every bit of state lives in
// Redis (the group's pending entries), so any Queue in any process may
// serve any call, and an event whose lease runs out goes to the next
// consumer that asks.
//
// # Recurring schedules
//
// RecurringTimers.Put stores a schedule (a cron Spec in a Location, or an
// interval Every) in Redis; each of its occurrences is an ordinary timer
// with ID OccurrenceID(schedule ID, nominal time), so every guarantee
// above holds per occurrence: exactly once, never early (due at the
// nominal time plus a jitter of at least 0), durable, and recognisable to
// consumers with ParseOccurrenceID. A schedule keeps Recurring.Ahead
// (default 2) occurrences armed. Workers arm what follows each occurrence
// they fire (Engine.ArmFired) and repair, every second, schedules whose worker
// died between the fire and the arming (Engine.RepairRecurring), so a crash
// leaves no gap and arms nothing twice. Occurrences missed while no worker
// ran follow the schedule's CatchUp policy, beyond the armed ones, which
// fire late like any timer. Pause, update and delete cancel pending
// occurrences with the change. A schedule's Overlap policy can make
// Consume skip an occurrence while its group still has the previous one
// pending. In a sharded namespace a schedule and its occurrences live in
// the shard of the schedule's ID. docs/recurring.md has the design.
//
// # Debounce
//
// Debounce runs "once, Delay after the last call, but never later than
// MaxWait after the first" for a key, in one script by the server's clock:
// it creates the timer of the key's window, pushes it back, or caps it at
// the window's deadline, and its result says which. A window's timer,
// DebounceID(key, ms the window opened), is an ordinary timer that fires
// once (and may deliver to an endpoint, DebounceOptions.Endpoint); a call
// after it fired opens the next window with a new ID. docs/debounce.md has the ID rule and what a replaying caller relies on.
//
// # Shards
//
// A namespace has a fixed number of shards, each one Redis Cluster hash
// tag, so one namespace can spread over a Cluster's masters while every
// script still touches one slot. Create a sharded namespace before first
// use with CreateNamespace (or `timerctl namespace create NS --shards N`);
// a namespace never created has DefaultShards (one), the layout timerq
// has always had. A Queue reads the count from Redis on first use, and
// again at most once a second, so a namespace created after the queue's
// first call is followed without a restart (a one-shard Schedule in that
// second is refused by Redis and retried in the new layout); Options.Shards,
// when set, must agree (ErrShardMismatch otherwise).
//
// A timer's shard is a fixed function of its ID, so Get, Cancel,
// Reschedule, FireNow and Wait go straight to it; ScheduleBatch makes one
// script call per shard in one pipeline; List, Stats, Engine.Purge and
// Engine.Claim visit every shard. Pollers (package poller) share the shards
// among themselves. Every guarantee above holds per timer on any number of
// shards; each shard has its own fire stream, which Consume reads for the
// group, and its own dead-letter stream. The readers for dashboards
// (Inspector.RecentFires, ReadFires, Inspector.Groups,
// Deliveries.DeadLetters) merge every shard's by time; a position in them
// is a cursor of one stream entry ID per shard, and an Event names its
// Shard, which Deliveries.Requeue takes. docs/redis-layout.md has the key
// layout and the shard function.
//
// # Testing with timerqtest
//
// Package timerqtest runs a Queue on an in-process miniredis whose clock
// the test moves, so code that schedules timers is tested without a Redis
// server and without sleeping: Env.Advance moves the server clock (the
// only clock the scripts read), Env.FireDue fires what is due as a worker
// would, and RequireScheduled, RequireNotScheduled and RequireFired check
// a timer's record, failing with its state and due time.
//
//	env := timerqtest.New(t, queue.Options{})
//	placeOrder(ctx, env.Queue, "order-42") // schedules its timeout in 30m
//	env.Advance(30 * time.Minute)
//	for _, f := range env.FireDue(t) {
//		handleTimeout(f) // the code under test
//	}
//	timerqtest.RequireFired(t, env.Queue, "timeout:order-42")
//
// # Errors
//
// Every error wraps one of the sentinel values (ErrNotFound,
// ErrAlreadyFired, ErrCancelled, ErrInvalidID, ErrInvalidDue,
// ErrInvalidOptions, ErrPermission, ErrOutOfMemory, ErrWrongType, ...) when
// it stems from one, so callers branch with errors.Is; a Redis or network
// error is wrapped as it is. Messages start with "timerq: " once, name the
// operation and the timer, and end with what to do when there is
// something to do:
//
//	timerq: timer already fired: cannot cancel "order-42", it fired at 2030-01-02T03:04:05Z
//	timerq: get "order-42": Redis refused a command: permission denied: NOPERM …
//
// Options and arguments are checked before Redis is contacted, so an
// invalid call writes nothing. A refusal by Redis (ErrPermission,
// ErrOutOfMemory, ErrWrongType, ErrMalformedRecord) also means the call
// changed nothing. After a network error or a timeout the call may or may
// not have run in Redis; retry it, as Schedule, Cancel and Reschedule
// give the same result when repeated.
package queue
