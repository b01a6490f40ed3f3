package poller

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/timerq/timerq/internal/errtext"
	"github.com/timerq/timerq/queue"
)

// Defaults of Options.
const (
	// DefaultBatchSize is how many timers one claim fires when
	// Options.BatchSize is 0.
	DefaultBatchSize = 256
	// DefaultMaxPollInterval caps an idle poller's sleep when
	// Options.MaxPollInterval is 0.
	DefaultMaxPollInterval = time.Second
	// DefaultMinClaimInterval is the least time between a claim that fired
	// timers and the shard's next claim when Options.MinClaimInterval is 0.
	DefaultMinClaimInterval = time.Millisecond
	// DefaultClaimTimeout bounds one claim when Options.ClaimTimeout is 0.
	DefaultClaimTimeout = 2 * time.Second
	// DefaultBackoffMin is the first retry delay after a Redis error when
	// Options.BackoffMin is 0.
	DefaultBackoffMin = 100 * time.Millisecond
	// DefaultBackoffMax caps the retry delay after Redis errors when
	// Options.BackoffMax is 0.
	DefaultBackoffMax = 5 * time.Second
	// DefaultLockExpiry is the maintenance lock's expiry when
	// MaintenanceOptions.LockExpiry is 0.
	DefaultLockExpiry = 8 * time.Second
	// DefaultPurgeInterval is how often the maintenance holder purges when
	// MaintenanceOptions.PurgeInterval is 0.
	DefaultPurgeInterval = 30 * time.Second
	// DefaultStatsInterval is how often the maintenance holder samples stats
	// when MaintenanceOptions.StatsInterval is 0.
	DefaultStatsInterval = 5 * time.Second
	// DefaultHeartbeat is how often a poller renews its membership when
	// Options.Heartbeat is 0.
	DefaultHeartbeat = time.Second
	// DefaultReplicasCheck is how often a poller reads the masters'
	// replicas when Options.ReplicasCheck is 0.
	DefaultReplicasCheck = 10 * time.Second
	// DefaultMemberTTL is how long a membership lasts without a heartbeat
	// when Options.MemberTTL is 0: a dead worker's shards move to the others
	// within about this long.
	DefaultMemberTTL = 3 * time.Second
	// DefaultTakeoverAfter is how overdue a shard's earliest timer must be
	// before a worker that does not own the shard claims it, when
	// TakeoverOptions.After is 0.
	DefaultTakeoverAfter = 250 * time.Millisecond
)

// Options configures a Poller. The zero value selects every default: a
// zero field means its Default constant, and none of the durations can be
// turned off (a negative one is refused).
type Options struct {
	// BatchSize is the most timers one claim fires, 1..queue.MaxBatch.
	// 0 means DefaultBatchSize (256). A full batch is followed at once by
	// another claim.
	BatchSize int

	// MaxPollInterval caps how long an idle poller sleeps between claims,
	// and so bounds the delay a lost wake message can cause. An idle
	// poller costs Redis about one call per interval. 0 means
	// DefaultMaxPollInterval (1 s).
	MaxPollInterval time.Duration

	// MinClaimInterval is the least time from the start of a claim that
	// fired timers to the shard's next claim. Timers that come due in
	// between fire together at its end: a shard costs Redis at most one
	// claim per interval, however many timers come due in it, and each of
	// them fires at most this much after its due time, plus the claim. A
	// shard whose last claim fired nothing is claimed at its next due time
	// itself, to about 0.1 ms, so sparse timers are not held back; a full
	// batch is followed by the next claim at once. At 2,000 timers/s one
	// claim per due timer cost Redis 1.2–1.5 times the CPU of one per
	// millisecond (BENCHMARKS.md; docs/operations.md tabulates the trade);
	// set a microsecond to claim each timer at its due time anyway. 0 means DefaultMinClaimInterval (1 ms); it
	// cannot exceed MaxPollInterval.
	MinClaimInterval time.Duration

	// ClaimTimeout bounds one claim, including the claim still running when
	// Run's context ends (it is not cancelled by that context, so that a
	// claim in flight completes). It only bounds socket I/O when the Redis
	// client has ContextTimeoutEnabled. 0 means DefaultClaimTimeout (2 s).
	ClaimTimeout time.Duration

	// BackoffMin and BackoffMax bound the capped exponential backoff, with
	// jitter, between retries after Redis errors. 0 means
	// DefaultBackoffMin (100 ms) and DefaultBackoffMax (5 s).
	BackoffMin, BackoffMax time.Duration

	// Logger receives one line per backoff step and maintenance events.
	// nil means slog.Default(); slog.New(slog.DiscardHandler) silences it.
	Logger *slog.Logger

	// WorkerID names this poller in the namespace's membership list. It
	// must be unique among live workers. "" means one made of the host
	// name, the process ID and a random suffix.
	WorkerID string

	// FixedShards, if not nil, lists the shard numbers (0..S-1 of the
	// namespace's S, see queue.Options.Shards) this poller claims, instead
	// of sharing the shards with the other workers by membership; such a
	// poller neither joins the membership nor takes over other shards.
	// nil means share them; an empty, non-nil slice claims none (the
	// poller then only competes for maintenance). Shards the namespace
	// does not have are ignored (and logged).
	FixedShards []int

	// Heartbeat is how often the poller renews its membership and re-reads
	// the live members. 0 means DefaultHeartbeat (1 s).
	Heartbeat time.Duration

	// MemberTTL is how long a membership lasts without a heartbeat; it must
	// exceed Heartbeat. 0 means DefaultMemberTTL (3 s).
	MemberTTL time.Duration

	// ReplicasCheck is how often, while the namespace has a replicas
	// setting N (queue.SetReplicas), the poller reads how many replicas
	// each Redis master serving its shards has in sync (one INFO per
	// master), logs a warning when a master has N or fewer (each needs
	// N + 1: N for WAIT N, one to survive a failover; queue.TooFewReplicas),
	// once per change, and reports the counts to Hooks.Replicas. It checks
	// at start too. 0 means DefaultReplicasCheck (10 s).
	ReplicasCheck time.Duration

	// Maintenance configures the tasks run by one replica at a time; its
	// Disabled field turns them off for this poller.
	Maintenance MaintenanceOptions

	// Takeover configures how this poller claims the shards it does not
	// own (on an unsharded namespace, the one shard when another worker
	// owns it) once their timers are overdue: what keeps a dead worker's
	// shards firing until its membership lapses.
	Takeover TakeoverOptions

	// Hooks are called on claims, errors and maintenance events, for
	// metrics. A nil field is not called.
	Hooks Hooks
}

// MaintenanceOptions configures the maintenance that one poller at a time
// runs, under a redsync lock: purging settled records past their retention
// and sampling queue.Stats.
type MaintenanceOptions struct {
	// Disabled turns maintenance off for this poller; the other replicas
	// still compete for it.
	Disabled bool

	// LockExpiry is the maintenance lock's expiry: after its holder dies,
	// another poller takes over within about this long. The holder extends
	// the lock every third of it. 0 means DefaultLockExpiry (8 s); at
	// least 30 ms.
	LockExpiry time.Duration

	// AcquireInterval is how often a poller that does not hold the lock
	// tries to take it. 0 means LockExpiry/4.
	AcquireInterval time.Duration

	// PurgeInterval is how often the holder purges. 0 means
	// DefaultPurgeInterval (30 s). Purging cannot be turned off alone:
	// settled records are kept by queue.Options.Retention (KeepForever
	// keeps them), or set Disabled on every poller.
	PurgeInterval time.Duration

	// StatsInterval is how often the holder samples queue.Stats for
	// Hooks.Stats. 0 means DefaultStatsInterval (5 s).
	StatsInterval time.Duration
}

// TakeoverOptions configures the takeover of overdue shards. On a
// namespace whose shards are shared by membership (Options.FixedShards nil),
// sharded or not, a poller watches every shard it does not own: it learns each one's earliest
// due time from its wake messages and from reading it, and claims the
// shard itself once that time is After overdue. The owner, if alive, has
// fired those timers by then, so the watcher only reads the next due time.
// If the owner died (or is stuck), the watcher's claim fires them, and it
// keeps claiming at the due times until the owner is back or the shard is
// reassigned. Claims are atomic, so a timer still fires exactly once,
// whoever claims it.
//
// A watched shard costs Redis nothing while it has no timer due, since
// the watcher learns of new ones from wake messages (so every worker
// subscribes to every shard's wake channel). While timers are due, each
// watcher reads the shard's earliest due time (one ZRANGE) about once per
// After, and claims only when it is overdue. A wake message lost in a
// reconnect can leave a dead owner's timer to wait for the membership to
// lapse (Options.MemberTTL), as without takeover.
type TakeoverOptions struct {
	// Disabled turns the takeover off for this poller: on a sharded
	// namespace it claims only its own shards, and a dead worker's shards
	// wait until its membership lapses (about MemberTTL plus a Heartbeat);
	// on an unsharded one it claims the one shard whoever owns it, as every
	// poller did before ownership (each claim then costs Redis a script
	// call per poller, most of them finding nothing).
	Disabled bool

	// After is how overdue a shard's earliest timer must be before this
	// poller claims a shard it does not own. Shorter resumes a dead
	// worker's shards sooner and costs more reads while timers are due.
	// 0 means DefaultTakeoverAfter (250 ms).
	After time.Duration
}

// Hooks observe a Poller, typically to feed metrics (see Metrics). They are
// called from the poller's goroutines and must not block.
type Hooks struct {
	// Claimed is called after each successful claim.
	Claimed func(res queue.ClaimResult)
	// ClaimFailed is called after each failed claim.
	ClaimFailed func(err error)
	// Maintenance is called with true when this poller takes the
	// maintenance lock, and with false when it loses or releases it.
	Maintenance func(held bool)
	// Stats is called with each stats sample taken by the lock holder.
	Stats func(s queue.Stats)
	// Purged is called after each purge pass with how many records it removed.
	Purged func(removed int)
	// Owned is called with the shards the poller claims, whenever they change.
	Owned func(shards []int)
	// Paused is called when a shard's claim failed because its Cluster slot
	// is migrating (TRYAGAIN, ASK, MOVED: queue.ErrSlotMigrating); the
	// shard is retried with backoff while the others go on.
	Paused func(shard int, err error)
	// Unavailable is called when a shard's claim failed because the Redis
	// serving it is not there: a Cluster that answers CLUSTERDOWN
	// (queue.ErrClusterDown, a failover under way) or a node that refuses
	// connections (queue.ErrUnreachable, a dead server, or a dead master
	// not yet replaced). UnavailableReason names which. The shard is
	// retried with backoff, on a Cluster at most FailoverBackoffMax apart,
	// so that it resumes soon after Redis promotes a replica.
	Unavailable func(shard int, err error)
	// Replicas is called after each check of the masters' replicas (see
	// Options.ReplicasCheck) with the namespace's replicas setting and
	// each master's replicas in sync, and with (0, nil) while the setting
	// is off. A check that cannot read a master does not call it.
	Replicas func(setting int, masters []queue.MasterReplicas)
}

// FailoverBackoffMax caps the retry delay of a shard whose Cluster node is
// unavailable (Hooks.Unavailable) when it is below Options.BackoffMax:
// Redis promotes a replica within seconds, and a longer delay would hold
// the shard back after the promotion.
const FailoverBackoffMax = 500 * time.Millisecond

// UnavailableReason returns the reason label of an error passed to
// Hooks.Unavailable: "cluster_down" (CLUSTERDOWN), "unreachable" (a failed
// connection), or "" for any other error.
func UnavailableReason(err error) string {
	switch {
	case errors.Is(err, queue.ErrClusterDown):
		return "cluster_down"
	case errors.Is(err, queue.ErrUnreachable):
		return "unreachable"
	}
	return ""
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		// One prefix: "timerq: poller: invalid options: …".
		return o, errtext.Errorf("poller: %w: "+format, append([]any{queue.ErrInvalidOptions}, args...)...)
	}
	switch {
	case o.BatchSize == 0:
		o.BatchSize = DefaultBatchSize
	case o.BatchSize < 0 || o.BatchSize > queue.MaxBatch:
		return bad("BatchSize %d is outside 1..%d; use 0 for the default %d", o.BatchSize, queue.MaxBatch, DefaultBatchSize)
	}
	durations := []struct {
		name string
		p    *time.Duration
		def  time.Duration
	}{
		{"MaxPollInterval", &o.MaxPollInterval, DefaultMaxPollInterval},
		{"MinClaimInterval", &o.MinClaimInterval, DefaultMinClaimInterval},
		{"ClaimTimeout", &o.ClaimTimeout, DefaultClaimTimeout},
		{"BackoffMin", &o.BackoffMin, DefaultBackoffMin},
		{"BackoffMax", &o.BackoffMax, DefaultBackoffMax},
		{"Maintenance.LockExpiry", &o.Maintenance.LockExpiry, DefaultLockExpiry},
		{"Maintenance.PurgeInterval", &o.Maintenance.PurgeInterval, DefaultPurgeInterval},
		{"Maintenance.StatsInterval", &o.Maintenance.StatsInterval, DefaultStatsInterval},
		{"Maintenance.AcquireInterval", &o.Maintenance.AcquireInterval, 0},
		{"Heartbeat", &o.Heartbeat, DefaultHeartbeat},
		{"ReplicasCheck", &o.ReplicasCheck, DefaultReplicasCheck},
		{"MemberTTL", &o.MemberTTL, DefaultMemberTTL},
		{"Takeover.After", &o.Takeover.After, DefaultTakeoverAfter},
	}
	for _, d := range durations {
		if *d.p < 0 {
			return bad("%s %v is negative; use a positive duration or 0 for the default", d.name, *d.p)
		}
		if *d.p == 0 {
			*d.p = d.def
		}
	}
	if o.Maintenance.AcquireInterval == 0 {
		o.Maintenance.AcquireInterval = o.Maintenance.LockExpiry / 4
	}
	if o.MinClaimInterval > o.MaxPollInterval {
		return bad("MinClaimInterval %v exceeds MaxPollInterval %v", o.MinClaimInterval, o.MaxPollInterval)
	}
	if o.BackoffMax < o.BackoffMin {
		return bad("BackoffMax %v is below BackoffMin %v", o.BackoffMax, o.BackoffMin)
	}
	if o.Maintenance.LockExpiry < 30*time.Millisecond {
		return bad("Maintenance.LockExpiry %v is too short to extend in time; use at least 30ms", o.Maintenance.LockExpiry)
	}
	if o.MemberTTL <= o.Heartbeat {
		return bad("MemberTTL %v must exceed Heartbeat %v, or every worker drops out between heartbeats", o.MemberTTL, o.Heartbeat)
	}
	for _, k := range o.FixedShards {
		if k < 0 || k >= queue.MaxShards {
			return bad("FixedShards holds %d, outside 0..%d", k, queue.MaxShards-1)
		}
	}
	if o.WorkerID == "" {
		host, _ := os.Hostname()
		o.WorkerID = fmt.Sprintf("%s-%d-%08x", host, os.Getpid(), rand.Uint32())
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}
