package queue

// A Queue's own methods are what an application calls to schedule, wait
// for and consume timers. The rest of the API is grouped by what it acts
// on, each group a small value returned by one method of the Queue:
//
//	q.Recurring()   recurring timers (cron and interval schedules)
//	q.Endpoints()   webhook endpoints
//	q.Deliveries()  attempt logs, dead letters and the delivery policy
//	q.Flows()       per-key flow-control policies and their state
//	q.Quarantine()  records a claim could not decode
//	q.Inspect()     read-only views for operators and dashboards
//	q.Keys()        the Redis key and channel names
//	q.Engine()      the primitives a worker runs (not a stable API)
//
// Each group holds only its Queue; it is as cheap to get as to keep.

// RecurringTimers is the API of a queue's recurring timers: schedules
// that materialise one ordinary timer per occurrence (docs/recurring.md).
type RecurringTimers struct{ q *Queue }

// Recurring returns the API of the queue's recurring timers.
func (q *Queue) Recurring() RecurringTimers { return RecurringTimers{q} }

// Endpoints is the API of a namespace's webhook endpoints, to which
// timerworker --deliver pushes fires (docs/delivery.md).
type Endpoints struct{ q *Queue }

// Endpoints returns the API of the namespace's webhook endpoints.
func (q *Queue) Endpoints() Endpoints { return Endpoints{q} }

// Deliveries is the API of what happens to fires after they are handed
// to consumers and endpoints: each timer's attempt log, the dead letters,
// and the namespace's delivery policy.
type Deliveries struct{ q *Queue }

// Deliveries returns the API of the namespace's deliveries.
func (q *Queue) Deliveries() Deliveries { return Deliveries{q} }

// Flows is the API of per-key flow control: the policies that limit how
// fast and how many fires of one flow key are delivered, and their state
// (docs/delivery.md#flow-control).
type Flows struct{ q *Queue }

// Flows returns the API of the namespace's flow control.
func (q *Queue) Flows() Flows { return Flows{q} }

// Quarantine is the API of the namespace's quarantines: the records a
// claim moved aside because it could not decode them, kept for an operator
// to read, drop or restore (docs/operations.md).
type Quarantine struct{ q *Queue }

// Quarantine returns the API of the namespace's quarantines.
func (q *Queue) Quarantine() Quarantine { return Quarantine{q} }

// Inspector reads the state of a namespace for operators, dashboards and
// export: counters, workers, consumer groups, the due-time histogram, the
// latest fires and the namespace's layout. It never writes.
type Inspector struct{ q *Queue }

// Inspect returns the namespace's read-only views.
func (q *Queue) Inspect() Inspector { return Inspector{q} }

// Engine holds the primitives a timerworker runs: claims, arming of
// recurring timers, heartbeats, repair and purge. Package poller and
// timerq's own tools call them; applications run a poller.Poller instead.
//
// Engine is not a stable API: its methods may change in any release.
type Engine struct{ q *Queue }

// Engine returns the queue's worker primitives; see Engine.
func (q *Queue) Engine() Engine { return Engine{q} }
