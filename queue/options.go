package queue

import (
	"fmt"
	"net/netip"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Limits and defaults of Options.
const (
	// DefaultNamespace is used when Options.Namespace is empty.
	DefaultNamespace = "default"
	// DefaultMaxPayloadBytes is the payload limit when Options.MaxPayloadBytes is 0.
	DefaultMaxPayloadBytes = 64 << 10
	// MaxPayloadLimit is the largest Options.MaxPayloadBytes accepted.
	MaxPayloadLimit = 1 << 20
	// DefaultRetention is how long settled records are kept when
	// Options.Retention is 0.
	DefaultRetention = 7 * 24 * time.Hour
	// KeepForever, as Options.Retention, keeps settled records until deleted
	// by hand.
	KeepForever time.Duration = -1
	// DefaultStreamMaxLen bounds the fire stream when Options.StreamMaxLen is 0.
	DefaultStreamMaxLen = 1_000_000
	// Unbounded, as Options.StreamMaxLen, never trims the fire stream: it
	// grows until entries are deleted by hand (XTRIM, XDEL).
	Unbounded int64 = -1
	// DefaultRecheckInterval is how often Wait re-reads timer state when
	// Options.RecheckInterval is 0.
	DefaultRecheckInterval = 10 * time.Second
	// MaxBatch is the most timers one Engine.Claim, List or Engine.Purge call handles.
	MaxBatch = 1000
	// DefaultListLimit is the page size of every listing (List,
	// RecurringTimers.List, Deliveries.DeadLetters, ReadFires) whose
	// options' Limit is 0.
	DefaultListLimit = 100
)

// Options configures a Queue. The zero value is valid and selects every
// default: each field's zero value means its Default constant, and a field
// that can be turned off says which named value does it.
type Options struct {
	// Namespace separates independent sets of timers in one Redis; it is
	// 1-64 characters of [A-Za-z0-9_.-]. "" means DefaultNamespace
	// ("default").
	Namespace string

	// MaxPayloadBytes caps a timer's payload, 1..MaxPayloadLimit (1 MiB).
	// 0 means DefaultMaxPayloadBytes (64 KiB). The cap cannot be turned
	// off: keep large data elsewhere and put a reference in the payload.
	MaxPayloadBytes int

	// Retention is how long fired and cancelled records stay readable (and
	// keep their ID from being scheduled again) before Engine.Purge removes them.
	// 0 means DefaultRetention (7 days); KeepForever keeps them.
	Retention time.Duration

	// StreamMaxLen approximately bounds the fire stream, which Engine.Claim appends
	// to (XADD MAXLEN ~). 0 means DefaultStreamMaxLen (1,000,000 entries);
	// Unbounded turns trimming off.
	StreamMaxLen int64

	// TimerURLAllow admits timers' own delivery URLs (NewTimer.URL) whose
	// host is an address literal in these ranges, though loopback,
	// private or otherwise reserved, as PutEndpointOptions.Allow does for
	// endpoints. Nil admits none. The dispatcher's SSRF guard has its own
	// allow list, checked at every connection.
	TimerURLAllow []netip.Prefix

	// RecheckInterval is how often Wait re-reads the state of every waited
	// timer, so that a pub/sub message lost in transit delays a waiter by at
	// most this long. 0 means DefaultRecheckInterval (10 s). It cannot be
	// turned off: pub/sub is a hint, the record is the truth.
	RecheckInterval time.Duration

	// Shards is the shard count this client expects the namespace to have.
	// 0 reads it from Redis (CreateNamespace stores it; a namespace never
	// created has DefaultShards). A different non-zero value makes every
	// call fail with ErrShardMismatch, so a misconfigured client cannot
	// write timers where no worker looks.
	Shards int

	// PubSub selects classic or sharded pub/sub for wakeups. The zero value,
	// PubSubAuto, uses sharded pub/sub on a Redis Cluster that has it (Redis
	// 7.0+), classic pub/sub elsewhere. Wakeups cannot be turned off.
	// Every client and worker of a namespace must use the same flavour, so
	// change it only to force classic pub/sub on all of them.
	PubSub PubSubMode

	// ReplicaTimeout bounds each WAIT in a namespace with replicas
	// (SetReplicas): how long Schedule and a claim wait for the replicas to
	// acknowledge a write before giving up with ErrNotReplicated. A claim
	// decision not committed is taken over after twice this plus a second.
	// 0 means DefaultReplicaTimeout (1 s). Unused without the setting.
	ReplicaTimeout time.Duration

	// TracerProvider makes the queue's OpenTelemetry spans (timerq.schedule,
	// timerq.claim, timerq.fire, timerq.consume; docs/tracing.md). nil means
	// the global provider, otel.GetTracerProvider(), which makes no spans
	// unless the application installs one with otel.SetTracerProvider (even
	// after New). Whatever the provider, a timer scheduled inside a sampled
	// span keeps that span's traceparent until it fires, so that its fire
	// and its handler join the trace; one scheduled outside stores nothing.
	TracerProvider trace.TracerProvider

	// CoalesceSchedules merges concurrent single-timer schedules (Schedule,
	// ScheduleIn, and ScheduleBatch of one timer) made through this Queue
	// into shared script calls: a group commit. A call that finds fewer
	// than two calls in flight goes at once; calls that arrive meanwhile
	// wait for one to finish and then go together, up to 256 in one call.
	// One script call costs Redis about as much for one timer as for a
	// hundred, so under many concurrent callers this multiplies the
	// schedules one Redis core can take, while a lone caller waits for
	// nothing. Results and errors are each caller's own, as without it: a
	// timer the script refuses (a stale Epoch, a missing endpoint, a FireBy
	// before its due time, the pending quota) fails its own caller alone,
	// and the others merged into its script call go again one at a time.
	// Calls inside a sampled span are never merged, so each keeps its
	// trace. The HTTP API turns it on.
	CoalesceSchedules bool
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if err := ValidateNamespace(o.Namespace); err != nil {
		return o, err
	}
	switch {
	case o.MaxPayloadBytes == 0:
		o.MaxPayloadBytes = DefaultMaxPayloadBytes
	case o.MaxPayloadBytes < 0 || o.MaxPayloadBytes > MaxPayloadLimit:
		return o, fmt.Errorf("%w: MaxPayloadBytes %d is outside 1..%d; use 0 for the 64 KiB default",
			ErrInvalidOptions, o.MaxPayloadBytes, MaxPayloadLimit)
	}
	switch {
	case o.Retention == 0:
		o.Retention = DefaultRetention
	case o.Retention < 0 && o.Retention != KeepForever:
		return o, fmt.Errorf("%w: Retention %v is negative; use a positive duration, 0 for the 7-day default or KeepForever",
			ErrInvalidOptions, o.Retention)
	case o.Retention > 0 && o.Retention < time.Millisecond:
		return o, fmt.Errorf("%w: Retention %v is under a millisecond, the resolution of timerq's clock",
			ErrInvalidOptions, o.Retention)
	}
	switch {
	case o.StreamMaxLen == 0:
		o.StreamMaxLen = DefaultStreamMaxLen
	case o.StreamMaxLen < 0 && o.StreamMaxLen != Unbounded:
		return o, fmt.Errorf("%w: StreamMaxLen %d is negative; use a positive bound, 0 for the default or Unbounded",
			ErrInvalidOptions, o.StreamMaxLen)
	}
	if o.Shards < 0 || o.Shards > MaxShards {
		return o, fmt.Errorf("%w: Shards %d is outside 1..%d; use 0 to read the namespace's shard count from Redis",
			ErrInvalidOptions, o.Shards, MaxShards)
	}
	if o.PubSub < PubSubAuto || o.PubSub > PubSubSharded {
		return o, fmt.Errorf("%w: PubSub %d is not PubSubAuto, PubSubClassic or PubSubSharded", ErrInvalidOptions, o.PubSub)
	}
	switch {
	case o.ReplicaTimeout == 0:
		o.ReplicaTimeout = DefaultReplicaTimeout
	case o.ReplicaTimeout < time.Millisecond:
		return o, fmt.Errorf("%w: ReplicaTimeout %v is under a millisecond, WAIT's resolution; use a positive duration or 0 for the 1 s default",
			ErrInvalidOptions, o.ReplicaTimeout)
	}
	switch {
	case o.RecheckInterval == 0:
		o.RecheckInterval = DefaultRecheckInterval
	case o.RecheckInterval < 0:
		return o, fmt.Errorf("%w: RecheckInterval %v is negative; use a positive duration or 0 for the default",
			ErrInvalidOptions, o.RecheckInterval)
	}
	return o, nil
}

// retentionMillis is the retention as the scripts take it: 0 keeps forever.
func (o Options) retentionMillis() int64 {
	if o.Retention == KeepForever {
		return 0
	}
	return o.Retention.Milliseconds()
}

// streamMaxLen is the bound as the claim script takes it: 0 is unbounded.
func (o Options) streamMaxLen() int64 {
	if o.StreamMaxLen == Unbounded {
		return 0
	}
	return o.StreamMaxLen
}
