// Package dispatch runs push delivery: a Dispatcher leases a namespace's
// fires as a consumer group of the queue and delivers each to its endpoint
// with package deliver, settling it by the endpoint's retry policy. It is
// apart from deliver so that package queue may use deliver's validation
// (deliver.ValidateURL, deliver.ParseSecret) without an import cycle.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/sleep"
	"github.com/timerq/timerq/queue"
)

// Defaults of Dispatcher.
const (
	// DefaultGroup is Dispatcher.Group when it is "": the consumer group
	// every dispatcher of a namespace shares (queue.DefaultDeliveryGroup).
	DefaultGroup = queue.DefaultDeliveryGroup
	// DefaultDispatchLease is Dispatcher.Lease when it is 0. A fire whose
	// dispatcher died is delivered again once its lease runs out. A retry
	// delay longer than the lease (queue.Release's limit) is kept in
	// full: the fire comes back each lease and is released again, untried,
	// until the delay its attempt logged has run.
	DefaultDispatchLease = time.Minute
	// DefaultMaxOutstanding is Dispatcher.MaxOutstanding when it is 0.
	DefaultMaxOutstanding = 1024
	// DefaultBacklog is Dispatcher.Backlog when it is 0.
	DefaultBacklog = 4
	// BusyDelay is how long a fire waits, released, when its endpoint's
	// backlog in this dispatcher is full even of the fires leased beyond
	// its room (Dispatcher), or its endpoint could not be looked up.
	BusyDelay = time.Second
	// DisabledDelay is how long a fire of a disabled endpoint waits,
	// released, before it is looked at again (at most the lease): it is
	// kept, not dead-lettered, until the endpoint is enabled.
	DisabledDelay = 5 * time.Second
	// groupMaxAttempts is the group's queue-side limit: each endpoint's
	// Policy decides when a fire is dead-lettered, not the group.
	groupMaxAttempts = 1 << 20
)

// ErrNoEndpoint is what Dispatcher.Lookup wraps when no endpoint has the
// name: the fire is dead-lettered. So is a fire whose Lookup error wraps
// deliver.ErrRefused (the Sender's guard refuses the endpoint's address),
// ErrInvalidURL, ErrInvalidEndpoint, ErrInvalidPolicy or ErrInvalidSecret:
// the endpoint as stored can never be delivered to by this dispatcher,
// which reports it to OnError once, not for every fire. Any other Lookup
// error is taken as passing, and the fire is tried again after BusyDelay.
var ErrNoEndpoint = errors.New("timerq: dispatch: no such endpoint")

// Report is what a Dispatcher tells OnAttempt after each attempt, for
// attempt logs and metrics.
type Report struct {
	// Event is the fire; Endpoint the endpoint's name.
	Event    queue.Event
	Endpoint string
	// Attempt is what Send returned; Number the attempt's number for this
	// fire, from 1, counted in the timer's attempt log.
	Attempt deliver.Attempt
	Number  int
	// Stopped means the attempt was cut short by the dispatcher's stop and
	// the fire handed back: no attempt of the endpoint's.
	Stopped bool
	// Unsent means no request was sent: the attempt (or the retry it
	// waited for, or its hand-back untried) would have begun past the
	// fire's deadline (queue.Event.Deadline), so the fire was
	// dead-lettered instead (Attempt.Reason is deliver.ReasonDeadline) and
	// the attempt it did not make logged. So was a fire that Lease
	// dead-lettered for its deadline instead of handing it out.
	Unsent bool
	// SettleErr is the error, if any, of acknowledging, releasing or
	// dead-lettering the delivery afterwards; the lease then runs out and
	// the fire is delivered again.
	SettleErr error
}

// Dispatcher delivers the fires of a queue's namespace to their
// endpoints: it leases fire events as consumer group Group (queue.Lease),
// sends each with a deliver.Sender, and settles it by deliver.Decide's verdict: Ack when
// delivered, Release with the backoff delay to retry, Release as a dead
// letter when the policy says so. Any number of dispatchers, in any
// processes, may share a group: each fire goes to one of them at a time,
// and a fire whose dispatcher dies is delivered again by another when its
// lease runs out (at least once). Fires that deliver nowhere (Route gives
// "") are acknowledged at once, in one round trip per leased batch.
//
// One slow endpoint does not delay the others: each endpoint has at most
// MaxInFlight attempts under way in this dispatcher and a backlog of
// Backlog·MaxInFlight leased fires waiting for a slot, and the dispatcher
// goes on leasing fires for the other endpoints. It leases about as many
// fires as its endpoints have room for (leaseCount); a fire leased beyond
// its endpoint's room (leaseCount's one fire past a full endpoint, or an
// endpoint's share of a lease sized by the others' room) waits in the
// backlog too, up to MaxInFlight more, and is sent as soon as a slot
// frees. Only fires beyond that are released for BusyDelay: an endpoint
// saturated for longer than it takes the dispatcher to lease past it
// MaxInFlight more times than it finished attempts meanwhile.
//
// A fire with a deadline (queue.NewTimer.FireWithin, FireBy) is never sent
// past it: before each attempt, a retry's included, and before handing a
// fire back untried, the dispatcher estimates the Redis server's clock
// (queue.Delivery.ServerNow: the server's time at the lease plus the time
// since the lease request was sent, never behind the server's) and, if the
// attempt would begin past the deadline, dead-letters the fire with the
// reason deadline unsent, logs the attempt it did not make (outcome
// dead_letter, reason deadline) and reports it (Report.Unsent). A failed
// attempt whose retry would begin past the deadline is dead-lettered with
// the reason deadline (after what failed) instead of retried. A request
// already sent is not cut off at the deadline. The lease itself never
// hands out a fire past its deadline (queue.Lease): it dead-letters it,
// and the dispatcher logs and reports the attempt not made alike.
//
// Each attempt is appended to the timer's attempt log
// (queue.Deliveries.Attempts) in the round trip that settles it (delivered
// fires are acknowledged in batches, queue.Deliveries.AckAttempts), and the
// attempt number the policy sees is counted there: a fire handed back
// untried (a full backlog, a disabled endpoint, a failed Lookup, a
// stopping dispatcher) uses up no attempt. A first delivery costs no read;
// a redelivery reads the log's last entry (one round trip). An attempt
// whose dispatcher died before settling it is not counted.
type Dispatcher struct {
	// Queue is the namespace whose fires are delivered.
	Queue *queue.Queue
	// Group is the consumer group; "" means DefaultGroup.
	Group string
	// Consumer names this dispatcher in the group; "" means
	// "<hostname>-<pid>".
	Consumer string
	// Sender sends the attempts; nil means a deliver.Sender with a zero
	// Guard, which refuses every private address.
	Sender *deliver.Sender
	// Route names the endpoint a fire is delivered to, "" for none; nil
	// means the endpoint the timer names (queue.Event.Endpoint).
	Route func(queue.Event) string
	// Lookup returns the endpoint of a name. It is called for every fire,
	// so cache in it if reads are costly; nil means the queue's endpoints
	// through an Endpoints cache (one read per name per second) checked
	// with the Sender's Guard.
	Lookup func(ctx context.Context, name string) (deliver.Endpoint, error)
	// Lease is the group's lease (queue.LeaseOptions.Lease); 0 means
	// DefaultDispatchLease. Every dispatcher of a group must use the same.
	// Keep it above the longest endpoint Timeout: an attempt that outlasts
	// the lease may be made again, at the same time, by another dispatcher.
	Lease time.Duration
	// MaxOutstanding bounds the fires this dispatcher holds at once,
	// under way or waiting for their endpoint; 0 means
	// DefaultMaxOutstanding.
	MaxOutstanding int
	// Backlog is how many fires per slot of MaxInFlight an endpoint may
	// have waiting in this dispatcher, as leases are sized (one more per
	// slot for fires leased beyond that room, see above); 0 means
	// DefaultBacklog.
	Backlog int
	// OnAttempt, if set, is called after each attempt.
	OnAttempt func(Report)
	// OnError, if set, is called with errors that do not stop Run: a
	// failed lease, acknowledgement or release.
	OnError func(error)

	mu          sync.Mutex
	endpoints   map[string]*endpointState
	reported    map[string]string // endpoint: the undeliverable error last reported
	outstanding int
	freed       chan struct{}
	wg          sync.WaitGroup
	opts        queue.LeaseOptions
	policy      policyCache
	acks        chan delivered // to ackLoop
	ackDone     chan struct{}  // closed when ackLoop returns
	// busyWait is how long leaseCount waits for room before it leases at
	// least one fire anyway; 0 means busyPause. Tests lift it to check
	// the sizing without the machine's speed deciding it.
	busyWait time.Duration
}

type endpointState struct {
	limit   int // MaxInFlight, as last looked up
	running int
	backlog fifo
}

// fifo is the backlog of an endpoint: a queue that reuses its array, so
// that a backlog refilled as fast as it drains allocates nothing (a slice
// popped from its front loses its capacity and each push copies it).
type fifo struct {
	items []pending
	head  int // items[head:] are queued
}

func (q *fifo) len() int { return len(q.items) - q.head }

func (q *fifo) push(p pending) {
	if q.head > 0 && len(q.items) == cap(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, p)
}

func (q *fifo) pop() pending {
	p := q.items[q.head]
	q.items[q.head] = pending{} // let the fire's payload go
	if q.head++; q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return p
}

type pending struct {
	d  queue.Delivery
	ep deliver.Endpoint
}

// Run delivers until ctx is done (call it once per Dispatcher), then hands back the fires it holds
// (released at once, for another dispatcher) and returns nil once every
// attempt under way has ended. It returns an error only for a
// configuration it cannot run with.
func (d *Dispatcher) Run(ctx context.Context) error {
	if d.Queue == nil {
		return fmt.Errorf("%w: a Dispatcher needs a Queue", queue.ErrInvalidOptions)
	}
	if d.Sender == nil {
		d.Sender = &deliver.Sender{}
	}
	if d.Route == nil {
		d.Route = RouteByEndpoint
	}
	if d.Lookup == nil {
		d.Lookup = (&Endpoints{Queue: d.Queue, Guard: d.Sender.Guard}).Lookup
	}
	if d.Group == "" {
		d.Group = DefaultGroup
	}
	if d.Consumer == "" {
		host, _ := os.Hostname()
		d.Consumer = host + "-" + strconv.Itoa(os.Getpid())
	}
	if err := queue.ValidateConsumerName("group", d.Group); err != nil {
		return err
	}
	if err := queue.ValidateConsumerName("consumer", d.Consumer); err != nil {
		return err
	}
	if d.Lease == 0 {
		d.Lease = DefaultDispatchLease
	}
	if d.Lease < queue.MinLease || d.Lease > queue.MaxLease {
		return fmt.Errorf("%w: lease %v is outside %v..%v", queue.ErrInvalidOptions, d.Lease, queue.MinLease, queue.MaxLease)
	}
	if d.MaxOutstanding <= 0 {
		d.MaxOutstanding = DefaultMaxOutstanding
	}
	if d.Backlog <= 0 {
		d.Backlog = DefaultBacklog
	}
	if d.busyWait <= 0 {
		d.busyWait = busyPause
	}
	d.opts = queue.LeaseOptions{Lease: d.Lease, MaxAttempts: groupMaxAttempts}
	d.endpoints = map[string]*endpointState{}
	d.reported = map[string]string{}
	d.freed = make(chan struct{}, 1)
	d.acks, d.ackDone = make(chan delivered, d.MaxOutstanding), make(chan struct{})
	go d.ackLoop(context.WithoutCancel(ctx))

	defer func() {
		d.wg.Wait()
		close(d.acks)
		<-d.ackDone
	}()
	fails := 0
	leaser := &queue.Leaser{Queue: d.Queue, Group: d.Group, Consumer: d.Consumer}
	var died []queue.LeaseDeadLetter // what the last Lease dead-lettered instead of handing out
	onDeadLetter := func(x queue.LeaseDeadLetter) { died = append(died, x) }
	for ctx.Err() == nil {
		d.mu.Lock()
		free := d.MaxOutstanding - d.outstanding
		d.mu.Unlock()
		if free <= 0 {
			select {
			case <-ctx.Done():
			case <-d.freed:
			}
			continue
		}
		o := d.opts
		o.Count, o.Block = d.leaseCount(ctx, min(free, queue.MaxBatch, maxLeaseBatch)), time.Second
		o.OnDeadLetter = onDeadLetter
		died = died[:0]
		ds, err := leaser.Lease(ctx, o)
		if len(died) > 0 {
			d.logDiedAtLease(context.WithoutCancel(ctx), died)
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			d.onError(err)
			fails++
			sleep.For(ctx, min(time.Duration(fails)*100*time.Millisecond, 5*time.Second))
			continue
		}
		fails = 0
		var nowhere []string // fires of timers that deliver nowhere
		for _, dl := range ds {
			if d.Route(dl.Event) == "" {
				nowhere = append(nowhere, dl.DeliveryID)
				continue
			}
			d.dispatch(ctx, dl)
		}
		if len(nowhere) > 0 {
			if _, err := d.Queue.Ack(context.WithoutCancel(ctx), d.Group, nowhere...); err != nil {
				d.onError(err)
			}
		}
	}
	return nil
}

// Lease sizes (leaseCount).
const (
	maxLeaseBatch   = 256
	minLeaseBatch   = 64
	firstLeaseBatch = 32
	busyPause       = 5 * time.Millisecond
)

// leaseCount is how many fires the next Lease call asks for, at most n: as
// many as the endpoints this dispatcher holds fires for have room for
// (running and backlog, room), so that a busy endpoint's fires are not
// leased only to be released for a full backlog, each a round trip now
// and a lease again later. While they have room for less than a quarter
// of what they hold at most, or than minLeaseBatch, it waits up to
// busyPause for more (fewer, larger leases), then leases what room there
// is and at least one: fires of other endpoints, in the stream behind the
// busy one's, are still leased. That one fire, if it is the full
// endpoint's and no slot freed meanwhile, is the only one leased beyond
// room: it waits in the endpoint's backlog past its room (dispatch) and
// is sent as soon as a slot frees. Released as busy instead, it came back
// only BusyDelay later, a second late at the end of a burst; and with a
// shorter delay the released fires came back before these leases got
// past them in the stream, starving the fires behind. Room only grows
// while a Lease is under way (only Run adds fires), so a lease of room
// never overflows. A dispatcher that holds nothing leases
// firstLeaseBatch, then more as it learns its endpoints' room.
func (d *Dispatcher) leaseCount(ctx context.Context, n int) int {
	room, size := d.room()
	if size == 0 {
		return min(n, firstLeaseBatch)
	}
	if enough := max(min(minLeaseBatch, size/4), 1); room < enough {
		t := time.NewTimer(d.busyWait)
		defer t.Stop()
	wait:
		for room < enough {
			select {
			case <-ctx.Done():
				return n
			case <-t.C:
				break wait
			case <-d.freed:
			}
			if room, size = d.room(); size == 0 {
				return min(n, firstLeaseBatch)
			}
		}
	}
	return min(n, max(room, 1))
}

// room sums the room of the endpoints that hold fires: how many more each
// takes before it releases fires as busy; size is how many they hold at
// most, 0 if none holds any.
func (d *Dispatcher) room() (room, size int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, st := range d.endpoints {
		c := st.limit * (1 + d.Backlog)
		room += max(c-st.running-st.backlog.len(), 0)
		size += c
	}
	return room, size
}

// Held is how many fires the dispatcher holds: attempts under way and
// fires waiting for a slot of their endpoint. Safe to call at any time.
func (d *Dispatcher) Held() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.outstanding
}

func (d *Dispatcher) onError(err error) {
	if d.OnError != nil {
		d.OnError(err)
	}
}

// dispatch starts dl's attempt, queues it behind its endpoint's attempts
// under way, or releases it.
func (d *Dispatcher) dispatch(ctx context.Context, dl queue.Delivery) {
	name := d.Route(dl.Event)
	ep, err := d.Lookup(ctx, name)
	switch {
	case errors.Is(err, ErrNoEndpoint):
		d.settle(dl, queue.ReleaseOptions{DeadLetter: true, Error: fmt.Sprintf("endpoint %q: %v", name, err)})
		return
	case undeliverable(err):
		// Looked up again it would be refused again, every second, for
		// ever: dead-letter it, to be redriven once the endpoint or the
		// guard is changed, and say so once.
		msg := undeliverableError(name, err)
		d.reportOnce(name, msg)
		d.settle(dl, queue.ReleaseOptions{DeadLetter: true, Error: msg})
		return
	case err != nil:
		d.onError(fmt.Errorf("looking up endpoint %q: %w", name, err))
		d.handBack(ctx, dl, name, min(BusyDelay, d.Lease), "endpoint lookup failed")
		return
	case ep.Disabled:
		d.handBack(ctx, dl, name, min(DisabledDelay, d.Lease), "endpoint disabled")
		return
	}
	if dl.Event.URL != "" { // the timer's own URL (timerurl.go)
		if ep, err = d.withTimerURL(ctx, ep, dl.Event.URL); errors.Is(err, errTimerURLsOff) {
			d.settle(dl, queue.ReleaseOptions{DeadLetter: true, Error: err.Error()})
			return
		} else if err != nil {
			d.onError(err)
			d.handBack(ctx, dl, name, min(BusyDelay, d.Lease), "delivery policy lookup failed")
			return
		}
	}
	if ep.Name == "" {
		ep.Name = name
	}
	limit := ep.MaxInFlight
	if limit <= 0 {
		limit = deliver.DefaultMaxInFlight
	}
	d.mu.Lock()
	delete(d.reported, name) // delivered to again: a later refusal is news
	st := d.endpoints[name]
	if st == nil {
		st = &endpointState{}
		d.endpoints[name] = st
	}
	st.limit = limit
	switch {
	case st.running < limit:
		st.running++
		d.outstanding++
		d.mu.Unlock()
		d.wg.Add(1)
		go d.work(ctx, name, pending{dl, ep})
	case st.backlog.len() < limit*(d.Backlog+1):
		// Past the Backlog·limit that leases are sized for (room), a fire
		// leased beyond room waits too, up to limit more (Dispatcher,
		// leaseCount): leases past a full endpoint take one fire a
		// busyPause at most, and each attempt finished takes one from
		// the backlog, so that an endpoint briefly full (a burst, a
		// stall of a few milliseconds) has none of its fires released.
		st.backlog.push(pending{dl, ep})
		d.outstanding++
		d.mu.Unlock()
	default:
		d.mu.Unlock()
		d.handBack(ctx, dl, name, min(BusyDelay, d.Lease), "endpoint busy")
	}
}

// handBack releases dl untried, for why, to be leased again after delay;
// or, when that would come past the fire's deadline, dead-letters it for
// its deadline (missDeadline).
func (d *Dispatcher) handBack(ctx context.Context, dl queue.Delivery, endpoint string, delay time.Duration, why string) {
	if dl.PastDeadline(delay) {
		n, _ := d.attemptNumber(ctx, dl.Event)
		d.missDeadline(dl, endpoint, n, delay, "its next attempt, after "+why+",")
		return
	}
	d.settle(dl, queue.ReleaseOptions{Delay: delay, Error: why})
}

// missDeadline dead-letters dl unsent, for its deadline: what (its
// attempt number n, or what comes before it) would begin after wait,
// past the deadline by the estimate of the server's clock
// (queue.Delivery.ServerNow). It logs the attempt not made, with the
// outcome dead_letter and the reason deadline, in the round trip that
// dead-letters it, and reports it (Report.Unsent).
func (d *Dispatcher) missDeadline(dl queue.Delivery, endpoint string, n int, wait time.Duration, what string) {
	ev := dl.Event
	at := dl.ServerNow().Add(wait)
	a := deliver.Attempt{At: time.Now(), Decision: deliver.Decision{Outcome: deliver.DeadLetter, Reason: deliver.ReasonDeadline},
		Error: fmt.Sprintf("not sent: %s would begin at %s by the server clock (estimated, never behind it), past the fire deadline %s",
			what, at.UTC().Format(time.RFC3339Nano), ev.Deadline.UTC().Format(time.RFC3339Nano))}
	log := &queue.DeliveryAttempt{TimerID: ev.ID, Attempt: n, Due: ev.Due, StreamID: ev.StreamID, At: a.At,
		Outcome: a.Outcome.String(), Reason: string(a.Reason), Error: a.Error}
	err := d.settle(dl, queue.ReleaseOptions{PastDeadline: true, Error: describe(a), Log: log})
	if errors.Is(err, queue.ErrAttemptLog) {
		err = nil // settled; onError has it
	}
	if d.OnAttempt != nil {
		d.OnAttempt(Report{Event: ev, Endpoint: endpoint, Attempt: a, Number: n, Unsent: true, SettleErr: err})
	}
}

// logDiedAtLease logs, and reports (Report.Unsent), the attempts not made
// of fires that Lease dead-lettered for their deadline instead of handing
// them out, so that the timer's attempt log ends with why. (The group's
// attempts never run out at the lease, groupMaxAttempts; a malformed
// entry has no timer to log.) Fires that deliver nowhere have no attempt
// log. One round trip for the log, and a read of it per fire that had
// attempts before (attemptNumber); such fires are rare.
func (d *Dispatcher) logDiedAtLease(ctx context.Context, died []queue.LeaseDeadLetter) {
	var logs []queue.DeliveryAttempt
	var reports []Report
	for _, x := range died {
		endpoint := d.Route(x.Event)
		if !x.PastDeadline || endpoint == "" {
			continue
		}
		n, _ := d.attemptNumber(ctx, x.Event)
		a := deliver.Attempt{At: x.At, Decision: deliver.Decision{Outcome: deliver.DeadLetter, Reason: deliver.ReasonDeadline},
			Error: x.Cause}
		logs = append(logs, queue.DeliveryAttempt{TimerID: x.Event.ID, Attempt: n, Due: x.Event.Due, StreamID: x.Event.StreamID,
			At: a.At, Outcome: a.Outcome.String(), Reason: string(a.Reason), Error: a.Error})
		reports = append(reports, Report{Event: x.Event, Endpoint: endpoint, Attempt: a, Number: n, Unsent: true})
	}
	if err := d.Queue.Deliveries().LogAttempts(ctx, logs); err != nil {
		d.onError(err)
	}
	if d.OnAttempt != nil {
		for _, r := range reports {
			d.OnAttempt(r)
		}
	}
}

// work runs p's attempt, then those waiting for its endpoint, until none
// is left; once ctx is done it hands the waiting ones back.
func (d *Dispatcher) work(ctx context.Context, name string, p pending) {
	defer d.wg.Done()
	for {
		if ctx.Err() != nil {
			d.settle(p.d, queue.ReleaseOptions{Error: "dispatcher stopped"})
		} else {
			d.attempt(ctx, p)
		}
		d.mu.Lock()
		st := d.endpoints[name]
		d.outstanding--
		if st.backlog.len() == 0 {
			st.running--
			if st.running == 0 {
				delete(d.endpoints, name)
			}
			d.mu.Unlock()
			select {
			case d.freed <- struct{}{}:
			default:
			}
			return
		}
		p = st.backlog.pop()
		d.mu.Unlock()
		select {
		case d.freed <- struct{}{}:
		default:
		}
	}
}

// attempt sends one attempt and settles it.
func (d *Dispatcher) attempt(ctx context.Context, p pending) {
	timeout := p.ep.Timeout
	if timeout <= 0 {
		timeout = deliver.DefaultTimeout
	}
	// A fire that waited in the backlog may be near the end of its lease:
	// renew it so that no other dispatcher takes it over mid-attempt.
	if time.Until(p.d.LeaseExpires) < min(timeout+time.Second, d.Lease) {
		if _, err := d.Queue.ExtendLease(ctx, d.Group, p.d.DeliveryID, 0, d.opts); err != nil {
			if !errors.Is(err, queue.ErrLeaseLost) && !errors.Is(err, queue.ErrDeliveryNotFound) {
				d.onError(err)
			}
			return // another dispatcher has it, or it is settled
		}
	}
	ev := p.d.Event
	n, wait := d.attemptNumber(ctx, ev)
	if p.d.PastDeadline(wait) {
		// Checked last before the request, and with the wait of a retry
		// whose backoff or Retry-After is longer than the lease.
		d.missDeadline(p.d, p.ep.Name, n, wait, "attempt "+strconv.Itoa(n))
		return
	}
	if wait > 0 {
		// A retry whose backoff or Retry-After is longer than the lease:
		// the release could delay it only by the lease, so it waits again,
		// untried, for what is left.
		d.settle(p.d, queue.ReleaseOptions{Delay: min(wait, d.Lease), Error: "waiting to retry"})
		return
	}
	a := d.Sender.Send(ctx, p.ep, deliver.Fire{Namespace: d.Queue.Namespace(), TimerID: ev.ID, Due: ev.Due, FiredAt: ev.FiredAt,
		Payload: ev.Payload, Attempt: n, TraceParent: ev.TraceParent, Owner: ev.Owner, Epoch: ev.Epoch})
	if ctx.Err() != nil && a.Outcome != deliver.Delivered {
		// Cut short by the stop, not the endpoint's doing: no attempt.
		err := d.settle(p.d, queue.ReleaseOptions{Error: "dispatcher stopped"})
		if d.OnAttempt != nil {
			d.OnAttempt(Report{Event: ev, Endpoint: p.ep.Name, Attempt: a, Number: n, Stopped: true, SettleErr: err})
		}
		return
	}
	if a.Outcome == deliver.Retry && p.d.PastDeadline(a.Delay) {
		// Its retry would begin past the deadline: the deadline wins.
		a.Decision = deliver.Decision{Outcome: deliver.DeadLetter, Reason: deliver.ReasonDeadline, Cause: a.Reason}
	}
	log := &queue.DeliveryAttempt{TimerID: ev.ID, Attempt: n, Due: ev.Due, StreamID: ev.StreamID, At: a.At, Latency: a.Latency, Status: a.Status,
		Outcome: a.Outcome.String(), Error: a.Error}
	if a.Outcome != deliver.Delivered {
		log.Reason = string(a.Reason)
	}
	var err error
	switch a.Outcome {
	case deliver.Delivered:
		// Acknowledged with others in one round trip; ackLoop reports it.
		d.acks <- delivered{id: p.d.DeliveryID, log: *log, report: Report{Event: ev, Endpoint: p.ep.Name, Attempt: a, Number: n}}
		return
	case deliver.Retry:
		log.RetryIn = a.Delay
		err = d.settle(p.d, queue.ReleaseOptions{Delay: min(a.Delay, d.Lease), Error: describe(a), Log: log})
	default:
		err = d.settle(p.d, queue.ReleaseOptions{DeadLetter: true, PastDeadline: a.Reason == deliver.ReasonDeadline,
			Error: describe(a), Log: log})
	}
	if errors.Is(err, queue.ErrAttemptLog) {
		err = nil // settled; onError has it
	}
	if d.OnAttempt != nil {
		d.OnAttempt(Report{Event: ev, Endpoint: p.ep.Name, Attempt: a, Number: n, SettleErr: err})
	}
}

// attemptNumber is the number of ev's attempt about to be made: 1 on its
// first delivery to the group, else one more than the last attempt of
// this fire (its stream entry) in the timer's attempt log (the group's
// delivery count if the log cannot be read). wait, if positive, is how
// long the last attempt's retry delay has still to run: a delay longer
// than the lease, which one release cannot give.
func (d *Dispatcher) attemptNumber(ctx context.Context, ev queue.Event) (n int, wait time.Duration) {
	if ev.Attempt <= 1 {
		return 1, 0
	}
	last, ok, err := d.Queue.Deliveries().LastAttempt(ctx, ev.ID)
	switch {
	case err != nil:
		d.onError(fmt.Errorf("reading the attempt log of %s: %w", ev.ID, err))
		return ev.Attempt, 0
	case !ok || last.StreamID != ev.StreamID:
		return 1, 0
	}
	if last.Outcome == deliver.Retry.String() {
		// Within a few milliseconds is due: a release's delay is
		// counted in whole milliseconds by the server's clock.
		if w := time.Until(last.At.Add(last.Latency + last.RetryIn)); w > retrySlack {
			wait = w
		}
	}
	return last.Attempt + 1, wait
}

// retrySlack is how early a retry may start against the delay its
// attempt logged: clocks of two dispatchers' hosts, and the server's,
// differ by a little.
const retrySlack = 50 * time.Millisecond

// settle releases dl, with a context of its own so that a stopping
// dispatcher still hands its fires back.
func (d *Dispatcher) settle(dl queue.Delivery, ro queue.ReleaseOptions) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := d.Queue.Release(ctx, d.Group, dl.DeliveryID, ro, d.opts)
	if errors.Is(err, queue.ErrLeaseLost) || errors.Is(err, queue.ErrDeliveryNotFound) {
		return nil // another dispatcher decides
	}
	if err != nil {
		d.onError(err)
	}
	return err
}

// undeliverable reports whether a Lookup error says the endpoint as stored
// can never be delivered to by this dispatcher: its guard refuses the
// address, or the engine refuses its configuration.
func undeliverable(err error) bool {
	for _, e := range []error{deliver.ErrRefused, deliver.ErrInvalidURL, deliver.ErrInvalidEndpoint,
		deliver.ErrInvalidPolicy, deliver.ErrInvalidSecret} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// undeliverableError is the dead letter's error for an undeliverable
// endpoint: what refused it and what to do. Operators read it in the
// dashboard and the API, and applications in Go: it names the dashboard's
// action and the Go call, and the dashboard shows timerctl's command
// beside it.
func undeliverableError(name string, err error) string {
	cause := strings.TrimPrefix(err.Error(), fmt.Sprintf("endpoint %q url: ", name))
	redrive := fmt.Sprintf("then requeue its dead letters (the dashboard's Deliveries page: Redrive all of %s; Deliveries().Redrive with RedriveOptions{Endpoint: %q} in Go)", name, name)
	if c, ok := strings.CutPrefix(cause, deliver.ErrRefused.Error()+": "); ok {
		return fmt.Sprintf("endpoint %q is refused by this worker's SSRF guard: %s; %s", name, c, redrive)
	}
	return fmt.Sprintf("endpoint %q cannot be delivered to as stored: %s; fix it, %s", name, cause, redrive)
}

// reportOnce passes msg to OnError unless it is what was last reported
// for endpoint name.
func (d *Dispatcher) reportOnce(name, msg string) {
	d.mu.Lock()
	last, seen := d.reported[name]
	d.reported[name] = msg
	d.mu.Unlock()
	if !seen || last != msg {
		d.onError(errors.New(msg))
	}
}

// describe is the error recorded with a retried or dead-lettered fire.
func describe(a deliver.Attempt) string {
	s := string(a.Reason)
	if a.Cause != "" {
		s += " after " + string(a.Cause)
	}
	if a.Status != 0 {
		s += ": HTTP " + strconv.Itoa(a.Status)
	}
	if a.Error != "" {
		s += ": " + a.Error
	}
	return s
}
