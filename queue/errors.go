package queue

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/timerq/timerq/internal/errtext"
)

// Sentinel errors. Every error returned by this package that stems from one
// of these wraps it, so callers test with errors.Is.
//
// Every error this package returns starts with "timerq: " once, however
// deeply it is wrapped: a sentinel's text starts with it, and an error that
// adds context before a cause (the operation, the timer) puts the prefix
// in front and drops the cause's own, as in
// `timerq: get "order-42": Redis refused a command: permission denied: …`.
// Packages poller and schedule follow the same rule.
var (
	// ErrNotFound means no timer with that ID exists in the namespace (it was
	// never scheduled, or it settled and its retention has passed).
	ErrNotFound = errors.New("timerq: timer not found")
	// ErrAlreadyFired means the operation needs a scheduled timer but this one
	// has fired.
	ErrAlreadyFired = errors.New("timerq: timer already fired")
	// ErrCancelled means the timer was cancelled: Wait returns it, and so do
	// operations that need a scheduled timer.
	ErrCancelled = errors.New("timerq: timer cancelled")

	// ErrInvalidID means a timer ID is empty, longer than 256 bytes, not
	// UTF-8, or contains control characters.
	ErrInvalidID = errors.New("timerq: invalid timer ID")
	// ErrOccurrenceID means a plain timer was given an ID of the form
	// "<schedule ID>@<Unix ms>" (keyspace.SplitOccurrence), which names an
	// occurrence of a recurring schedule: only the schedule creates those.
	// It wraps ErrInvalidID. Restore takes such an ID only while its
	// schedule exists (docs/recurring.md, "Occurrence IDs are reserved").
	ErrOccurrenceID = fmt.Errorf("%w: the form <schedule ID>@<Unix ms> is reserved for occurrences of recurring schedules", ErrInvalidID)
	// ErrInvalidNamespace means a namespace is not 1-64 characters of
	// [A-Za-z0-9_.-].
	ErrInvalidNamespace = errors.New("timerq: invalid namespace")
	// ErrInvalidDue means a due time is zero or outside 1970-01-01 to
	// 9999-12-31 (UTC).
	ErrInvalidDue = errors.New("timerq: invalid due time")
	// ErrPayloadTooLarge means a payload exceeds Options.MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("timerq: payload too large")
	// ErrInvalidOptions means an Options field or an argument is out of range.
	ErrInvalidOptions = errors.New("timerq: invalid options")
	// ErrNilClient means New was given a nil Redis client.
	ErrNilClient = errors.New("timerq: nil Redis client")
	// ErrWrongType means one of the namespace's keys holds a value of another
	// type: something else writes there.
	ErrWrongType = errors.New("timerq: a namespace key holds the wrong type")
	// ErrLayout means a key of the namespace holds the marker a newer
	// timerq leaves when it upgrades the namespace's layout
	// (docs/redis-layout.md, "Layout versions"): this build does not know
	// that layout, changed nothing, and must be upgraded. It wraps
	// ErrWrongType, since the key holds a string where this build keeps
	// another type; its message says not to delete the key.
	ErrLayout = fmt.Errorf("%w: the namespace uses a newer layout than this build of timerq", ErrWrongType)
	// ErrPermission means Redis refused a command for lack of an ACL right
	// (NOPERM): a key, a channel or a command the user may not use. The
	// operation changed nothing, and the error names the missing right.
	// docs/security.md lists the rights of each role.
	ErrPermission = errors.New("timerq: Redis refused a command: permission denied")
	// ErrOutOfMemory means Redis is at maxmemory with the noeviction policy
	// and refused a write (OOM). The operation changed nothing; claims keep
	// firing and purges free memory.
	ErrOutOfMemory = errors.New("timerq: Redis is out of memory")
	// ErrSlotMigrating means Redis Cluster refused a script because the
	// Cluster slot of the timer's shard was being moved (TRYAGAIN, ASK,
	// MOVED), for longer than the queue's own retries (a few seconds). The
	// call changed nothing; retry it.
	ErrSlotMigrating = errors.New("timerq: the shard's Cluster slot is migrating")
	// ErrClusterDown means Redis Cluster refused a script with CLUSTERDOWN:
	// the node answering considers the Cluster down, most often because a
	// master has failed and its replica is not yet promoted (a failover
	// takes cluster-node-timeout plus about a second), for longer than the
	// queue's own retries. The call changed nothing; retry it.
	ErrClusterDown = errors.New("timerq: Redis Cluster is down (CLUSTERDOWN): a failover is probably under way")
	// ErrUnreachable means the Redis node that serves the timer's shard
	// could not be connected to (the dial failed): the node is down, or a
	// Cluster client still routes to a failed master until it learns of
	// the promoted replica (ReloadOnFailover makes that quick). The error
	// wraps the dial error. A call that fails with it alone may still have
	// reached Redis on an earlier attempt of go-redis's own retries, so
	// Schedule reports ErrOutcomeUnknown beside it.
	ErrUnreachable = errors.New("timerq: cannot connect to Redis")
	// ErrOutcomeUnknown means a write may or may not have happened: the
	// command was, or may have been, sent to Redis, and no reply came back
	// (a connection lost or timed out mid-call, a server that crashed, or
	// go-redis retrying a call whose reply was lost and failing to
	// reconnect). Schedule and ScheduleBatch are idempotent by ID, so
	// calling them again with the same IDs, due times and payloads is safe:
	// a timer that was written is reported with Created false and is not
	// scheduled twice. The error also wraps its cause.
	ErrOutcomeUnknown = errors.New("timerq: outcome unknown: retry with the same ID (safe: scheduling is idempotent)")
	// ErrMalformedRecord means a timer's record in Redis is not one timerq
	// writes (or a scheduled timer has no due time): something else wrote
	// under the namespace. The operation changed nothing; the error names
	// the timer.
	ErrMalformedRecord = errors.New("timerq: malformed timer record")
	// ErrDeadLetterNotFound means Deliveries.Requeue was given the ID of a dead letter
	// that is not (or no longer) in the dead-letter stream.
	ErrDeadLetterNotFound = errors.New("timerq: dead letter not found")
	// ErrInvalidFilter means a bulk cancel's filter (CancelFilter) selects
	// nothing it could name: an empty or invalid ID prefix.
	ErrInvalidFilter = errors.New("timerq: invalid bulk cancel filter")
	// ErrCancelJobNotFound means no bulk cancel job has that ID: it never
	// existed, or it ended longer than the retention ago.
	ErrCancelJobNotFound = errors.New("timerq: bulk cancel job not found")
	// ErrStaleEpoch means a timer was scheduled under an owner epoch
	// (NewTimer.Epoch) that is no longer the owner's current one: another
	// executor bumped it (BumpEpoch). Nothing was written.
	ErrStaleEpoch = errors.New("timerq: stale owner epoch")
	// ErrClosed means the Queue was closed.
	ErrClosed = errors.New("timerq: queue closed")
)

// errorf is fmt.Errorf for errors that add context (the operation, the
// timer) before a cause: the message starts with "timerq: " and the
// cause's own prefix is dropped.
var errorf = errtext.Errorf

// FieldError is a refusal of one field of a value given to queue, so that
// a caller that took the value from its own input (the HTTP API) can name
// the input's field. Schedule, ScheduleBatch, Debounce and the
// RecurringTimers calls that take a Recurring return one for each
// refusal of a field. Its text is Err's; errors.Is and errors.As see Err.
type FieldError struct {
	// Item is the index of the refused timer in ScheduleBatch's timers;
	// 0 outside a batch.
	Item int
	// Field is the Go name of the refused field of the value: of NewTimer
	// ("ID", "Due", "In", "Payload", "Endpoint", "URL", "FlowKey"), of
	// Recurring ("Spec", "Every", "CatchUp", ...) or of DebounceOptions
	// ("Delay", "MaxWait", "Payload", "Endpoint").
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// ShardError says that some shards of a namespace failed a read that visits
// every shard (Stats), while the others answered: the call returns their
// figures beside it. During a Cluster slot move, say, one shard fails and
// the rest of the namespace is still readable. errors.Is sees each shard's
// cause (ErrSlotMigrating, ErrWrongType, ...).
type ShardError struct {
	// Failed maps each failing shard to its error, which names the shard.
	Failed map[int]error
}

// Error lists the failing shards' errors in shard order.
func (e *ShardError) Error() string {
	shards := make([]int, 0, len(e.Failed))
	for k := range e.Failed {
		shards = append(shards, k)
	}
	slices.Sort(shards)
	msgs := make([]string, len(shards))
	for i, k := range shards {
		msgs[i] = e.Failed[k].Error()
	}
	return fmt.Sprintf("timerq: %d of the shards failed (the others answered): %s",
		len(shards), strings.Join(msgs, "; "))
}

// Unwrap returns the shards' errors, for errors.Is and errors.As.
func (e *ShardError) Unwrap() []error {
	out := make([]error, 0, len(e.Failed))
	for _, err := range e.Failed {
		out = append(out, err)
	}
	return out
}
