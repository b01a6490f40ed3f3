package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/aclright"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/scripts/lua"
)

// Limits of a namespace's shard count.
const (
	// DefaultShards is the shard count of a namespace used without being
	// created by CreateNamespace. One shard is the layout timerq used before
	// sharding, so existing data keeps working.
	DefaultShards = 1
	// MaxShards is the most shards a namespace may have.
	MaxShards = keyspace.MaxShards
)

// ErrShardMismatch means a client's Options.Shards disagrees with the shard
// count stored in Redis for the namespace, or CreateNamespace was asked to
// change the shard count of an existing namespace (refused: the timers
// would be stranded on the wrong shards).
var ErrShardMismatch = errors.New("timerq: shard count mismatch")

// ErrNamespaceInUse means CreateNamespace was asked for several shards for
// a namespace that already holds timers or schedules in the default
// one-shard layout, which the sharded layout would strand. Errors wrapping
// it wrap ErrShardMismatch too.
var ErrNamespaceInUse = errors.New("timerq: namespace already in use")

// PubSubMode selects how scripts announce wakeups.
type PubSubMode int

const (
	// PubSubAuto uses sharded pub/sub (SPUBLISH/SSUBSCRIBE, Redis 7.0+) on
	// a Redis Cluster whose servers accept SPUBLISH, where it keeps each
	// message on the node of its shard, and classic pub/sub otherwise: on a
	// standalone or Sentinel server sharded pub/sub gains nothing, and
	// classic needs no further ACL rights.
	PubSubAuto PubSubMode = iota
	// PubSubClassic uses PUBLISH/SUBSCRIBE. On a Cluster each message is
	// broadcast to every node.
	PubSubClassic
	// PubSubSharded uses SPUBLISH/SSUBSCRIBE: a message stays on the node
	// that owns its shard's slot.
	PubSubSharded
)

// layout is what a Queue learns from Redis on first use: the shard count
// and the pub/sub flavour.
type layout struct {
	spaces   []keyspace.Space
	created  bool // the meta key existed when the layout was read
	sharded  bool
	replicas int      // the namespace's replicas setting (SetReplicas); 0 = off
	keys     sync.Map // scriptShard -> []string, each script's keys per shard
	// read is when the meta key was last read (or confirmed by a
	// heartbeat), as time since layoutEpoch; 0 asks for a re-read.
	read atomic.Int64
	// at is each shard's key layout as far as this Queue knows: 2 once
	// a script found the shard upgraded (upgraded), else 0, layout 1. A
	// shard only ever moves from 1 to 2 (upgrade.lua), so a shard known
	// as 2 stays 2, and a shard taken for 1 that is 2 refuses the call
	// with TIMERQ_LAYOUT before writing anything.
	at []atomic.Int32
}

// layoutTTL is how long a Queue trusts the meta key it read: the first
// call after it reads the key again (one HMGET), so that a namespace
// created, or given a replicas setting, after the queue's first call is
// picked up within about a second, without a restart. Pollers renew it
// with their heartbeat, which reads the key in the same script.
var layoutTTL = time.Second

// layoutEpoch anchors layout.read to the monotonic clock.
var layoutEpoch = time.Now()

func sinceEpoch() int64 { return int64(time.Since(layoutEpoch)) }

// fresh reports whether the layout was read less than layoutTTL ago.
func (l *layout) fresh() bool {
	r := l.read.Load()
	return r != 0 && time.Duration(sinceEpoch()-r) < layoutTTL
}

type scriptShard struct {
	s      *lua.Script
	k      int
	layout int
}

func newLayout(ns string, shards int, sharded bool) *layout {
	return &layout{spaces: keyspace.Shards(ns, shards), sharded: sharded, at: make([]atomic.Int32, shards)}
}

// layoutOf is shard k's key layout as far as l knows: 1 or 2.
func (l *layout) layoutOf(k int) int {
	if l.at[k].Load() == 2 {
		return 2
	}
	return 1
}

// space is shard k, naming its keys as its layout does.
func (l *layout) space(k int) keyspace.Space { return l.spaces[k].AtLayout(l.layoutOf(k)) }

// upgraded reports whether err is the refusal of a script sent to shard k
// as layout sent because the shard was upgraded to layout 2
// (TIMERQ_LAYOUT 2, before any write), and then records the shard as
// layout 2, so that the call can run again, as layout 2.
func (l *layout) upgraded(k, sent int, err error) bool {
	if err == nil || sent == 2 || !hasRedisCode(err, "TIMERQ_LAYOUT") {
		return false
	}
	_, rest, _ := strings.Cut(err.Error(), "TIMERQ_LAYOUT ")
	if !strings.HasPrefix(rest, "2 ") {
		return false
	}
	l.at[k].Store(2)
	return true
}

// script returns script s, as built for shard k's layout, in the
// layout's pub/sub flavour.
func (l *layout) script(s *lua.Script, k int) *script { return l.scriptAt(s, l.layoutOf(k)) }

// scriptAt returns script s, as built for layout layout, in the layout's
// pub/sub flavour.
func (l *layout) scriptAt(s *lua.Script, layout int) *script {
	s = s.At(layout)
	if l.sharded {
		return redisScripts[s][1]
	}
	return redisScripts[s][0]
}

// PendingEnd is the exclusive score bound above every due time and below
// the bands where layout 2 keeps settled timers in the same set
// (scripts/lua/includes/pending_end.lua), as ZRANGEBYSCORE and ZCOUNT take
// it: a range of due times up to it reads scheduled timers only, in either
// layout of a shard's keys (Keys.Shard's first key).
const PendingEnd = "(1125899906842624"

// learnLayouts finds which of l's shards taken for layout 1 are layout 2:
// the legacy due set of an upgraded shard holds its marker
// (keyspace.LayoutMarker), where layout 1 keeps a sorted set. A Queue
// learns so when it first reads the namespace, one pipelined GET a
// shard, and of a shard upgraded later from the refusal of its first
// layout-1 script (layout.upgraded); the calls that read keys with plain
// commands ask again first. A shard whose marker cannot be read stays as
// it was.
func (q *Queue) learnLayouts(ctx context.Context, l *layout) {
	marker := keyspace.LayoutMarker(2)
	values := make([]*redis.StringCmd, len(l.spaces))
	_, _ = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, sp := range l.spaces {
			if l.layoutOf(k) == 1 {
				// GET, which every role's ACL line grants: WRONGTYPE on
				// layout 1's sorted set, redis.Nil when it is missing.
				values[k] = p.Get(ctx, sp.LegacyDue())
			}
		}
		return nil
	})
	for k, v := range values {
		if v != nil && v.Err() == nil && v.Val() == marker {
			l.at[k].Store(2)
		}
	}
}

// keysOf returns the keys script s takes on shard k, as the table gives
// them (lua.Script.Keys), built once per layout.
func (l *layout) keysOf(s *lua.Script, k int) []string {
	key := scriptShard{s, k, l.layoutOf(k)}
	if v, ok := l.keys.Load(key); ok {
		return v.([]string)
	}
	keys := s.Keys(l.space(k), "")
	l.keys.Store(key, keys)
	return keys
}

// keysFor returns the keys script s takes on shard k for group (the
// table's second argument: a consumer group, a debounce key, a schedule
// ID; "" for most scripts).
func (l *layout) keysFor(s *lua.Script, k int, group string) []string {
	if group == "" {
		return l.keysOf(s, k)
	}
	return s.Keys(l.space(k), group)
}

func (l *layout) shardOf(id string) int { return keyspace.ShardOf(id, len(l.spaces)) }

// layout returns the namespace's layout, reading it from Redis on first use:
// the shard count from the namespace's meta key, checked against
// Options.Shards, and whether the server takes SPUBLISH. A failed read is
// retried on the next call. Once read, the meta key is read again by the
// first call after layoutTTL (reread), so a namespace created or given a
// replicas setting later is followed.
func (q *Queue) layout(ctx context.Context) (*layout, error) {
	l := q.lay.Load()
	if l != nil {
		if l.fresh() || !q.layMu.TryLock() {
			// Fresh, or another call is reading it: use it as it is.
			return l, nil
		}
		defer q.layMu.Unlock()
		return q.reread(ctx, l)
	}
	q.layMu.Lock()
	defer q.layMu.Unlock()
	if l := q.lay.Load(); l != nil {
		return l, nil
	}
	shards, replicas, created, err := readMeta(ctx, q.rdb, q.opts.Namespace)
	if err != nil {
		err = q.redisError(err)
		if errors.Is(err, ErrPermission) {
			// Redis names neither the key nor the right here.
			return nil, errorf("read the shard count of namespace %q (missing right: %s): %w",
				q.opts.Namespace, aclright.Missing(err.Error(), q.opts.Namespace), err)
		}
		return nil, errorf("read the shard count of namespace %q: %w", q.opts.Namespace, err)
	}
	if err := q.checkShards(shards, created); err != nil {
		return nil, err
	}
	sharded := q.opts.PubSub == PubSubSharded
	if _, cluster := q.rdb.(*redis.ClusterClient); cluster && q.opts.PubSub == PubSubAuto {
		// A shard channel with the namespace's tag: it reaches no one.
		err := q.rdb.SPublish(ctx, keyspace.Namespace(q.opts.Namespace).Meta(), "probe").Err()
		var rerr redis.Error
		switch {
		case err == nil:
			sharded = true
		case errors.As(err, &rerr) && strings.Contains(strings.ToLower(rerr.Error()), "unknown command"):
			// Redis < 7 or miniredis: classic pub/sub.
		case errors.As(err, &rerr) && (hasRedisCode(err, "NOPERM") || isScriptACLError(err)):
			// The server has sharded pub/sub, as every other client of the
			// namespace will find; this user may not use it, which the
			// scripts will report with the rule to grant. Falling back to
			// classic pub/sub here would split the namespace's clients
			// between two flavours that do not hear each other.
			sharded = true
		default:
			return nil, errorf("probe for sharded pub/sub: %w", q.redisError(err))
		}
	}
	adopted, err := q.adopt(shards, replicas, created, sharded)
	if err != nil {
		return nil, err
	}
	if upgradeOnFirstUse {
		if _, err := q.Engine().upgradeStep(ctx, adopted, MaxBatch); err != nil && !errors.Is(err, ErrPermission) {
			return nil, err
		}
	}
	q.learnLayouts(ctx, adopted)
	return adopted, nil
}

// upgradeOnFirstUse makes a Queue upgrade its namespace to layout 2 when
// it first reads the namespace's layout: the tests set it to run the whole
// behavioural suite on layout 2 (TIMERQ_TEST_LAYOUT=2, export_test.go).
var upgradeOnFirstUse = false

// reread reads the meta key again for the layout l, read layoutTTL ago or
// more, and adopts what changed. A failed read keeps l for another
// layoutTTL: the call that asked goes on, and reports its own errors.
func (q *Queue) reread(ctx context.Context, l *layout) (*layout, error) {
	shards, replicas, created, err := readMeta(ctx, q.rdb, q.opts.Namespace)
	if err != nil || shards == len(l.spaces) && replicas == l.replicas && created == l.created {
		l.read.Store(sinceEpoch())
		return l, nil
	}
	// Changed: every call fails until the queue agrees with Redis again
	// (it re-reads on each), rather than writing the old layout.
	if err := q.checkShards(shards, created); err != nil {
		return nil, err
	}
	adopted, err := q.adopt(shards, replicas, created, l.sharded)
	if err == nil {
		q.learnLayouts(ctx, adopted)
	}
	return adopted, err
}

// adopt stores and returns the layout of shards shards.
func (q *Queue) adopt(shards, replicas int, created, sharded bool) (*layout, error) {
	if replicas > 0 {
		if err := checkReplicaClient(q.rdb); err != nil {
			return nil, err
		}
	}
	l := newLayout(q.opts.Namespace, shards, sharded)
	l.created = created
	l.replicas = replicas
	l.read.Store(sinceEpoch())
	q.lay.Store(l)
	return l, nil
}

// noteMeta compares the meta key's fields as a heartbeat read them with the
// loaded layout: the same renews it for layoutTTL, a change makes the next
// call read the key again (reread), with every check of a first read.
func (q *Queue) noteMeta(shards, replicas string) {
	l := q.lay.Load()
	if l == nil {
		return
	}
	n, rep := DefaultShards, 0
	if shards != "" {
		n, _ = strconv.Atoi(shards)
	}
	if replicas != "" {
		rep, _ = strconv.Atoi(replicas)
	}
	if n == len(l.spaces) && rep == l.replicas && (shards != "") == l.created {
		l.read.Store(sinceEpoch())
	} else {
		l.read.Store(0)
	}
}

// errRelayout marks the refusal of a write in a layout the namespace left
// (TIMERQ_RELAYOUT): nothing was written, and the next call re-reads.
var errRelayout = errors.New("the namespace's layout changed")

// relayout makes the next call re-read the layout, and returns the error
// of a write refused because the namespace now has shards shards.
func (q *Queue) relayout(shards string) error {
	if l := q.lay.Load(); l != nil {
		l.read.Store(0)
	}
	return fmt.Errorf("%w: namespace %q was created with %s shards after this client read its one-shard layout; nothing was written, and a retry uses the new layout (%w)",
		ErrShardMismatch, q.opts.Namespace, shards, errRelayout)
}

// checkShards checks the namespace's shard count against Options.Shards.
func (q *Queue) checkShards(shards int, created bool) error {
	if q.opts.Shards != 0 && q.opts.Shards != shards {
		how := "created with"
		if !created {
			how = "not created, so it has the default of"
		}
		noun := "shards"
		if shards == 1 {
			noun = "shard"
		}
		return fmt.Errorf("%w: Options.Shards is %d but namespace %q was %s %d %s; set Shards to %d or 0 (read it from Redis)",
			ErrShardMismatch, q.opts.Shards, q.opts.Namespace, how, shards, noun, shards)
	}
	return nil
}

// known returns the layout if it is loaded, else the one Options imply
// (Options.Shards, or 1), for accessors that cannot reach Redis.
func (q *Queue) known() *layout {
	if l := q.lay.Load(); l != nil {
		return l
	}
	return newLayout(q.opts.Namespace, max(q.opts.Shards, 1), q.opts.PubSub == PubSubSharded)
}

// readMeta reads the namespace's shard count (DefaultShards when the
// namespace was never created) and its replicas setting (0 when unset), in
// one HMGET.
func readMeta(ctx context.Context, rdb redis.UniversalClient, ns string) (shards, replicas int, created bool, _ error) {
	meta := keyspace.Namespace(ns).Meta()
	v, err := rdb.HMGet(ctx, meta, "shards", "replicas").Result()
	if err != nil {
		return 0, 0, false, err
	}
	if len(v) != 2 {
		return 0, 0, false, fmt.Errorf("HMGET %s replied %v", meta, v)
	}
	if s, ok := v[1].(string); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > MaxReplicas {
			return 0, 0, false, fmt.Errorf("the meta key %s holds replicas=%q, not 0..%d: something else wrote it", meta, s, MaxReplicas)
		}
		replicas = n
	}
	s, ok := v[0].(string)
	if !ok {
		return DefaultShards, replicas, false, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxShards {
		return 0, 0, false, fmt.Errorf("the meta key %s holds shards=%q, not 1..%d: something else wrote it", meta, s, MaxShards)
	}
	return n, replicas, true, nil
}

// CreateNamespace creates namespace ns with shards shards (1..MaxShards),
// storing the count in Redis, where every client and worker reads it. It
// reports whether it created the namespace: creating an existing namespace
// with the same count is a no-op. A different count is refused with
// ErrShardMismatch, since the timers would be stranded on the wrong shards;
// so is a sharded count for a namespace that already holds data under the
// default (one-shard) layout.
func CreateNamespace(ctx context.Context, rdb redis.UniversalClient, ns string, shards int) (bool, error) {
	if rdb == nil {
		return false, fmt.Errorf("%w: pass a client from redis.NewClient, redis.NewUniversalClient or similar", ErrNilClient)
	}
	if err := ValidateNamespace(ns); err != nil {
		return false, err
	}
	if shards < 1 || shards > MaxShards {
		return false, fmt.Errorf("%w: %d shards is outside 1..%d", ErrInvalidOptions, shards, MaxShards)
	}
	// The unsharded slot {NS}: the meta key, and the one-shard layout's keys
	// that would hold timers or schedules (lua.Create).
	keys := lua.Create.Keys(keyspace.Shard(ns, 0, 1), "")
	v, err := classic(lua.Create).Run(ctx, rdb, keys, shards).Int64Slice()
	if redis.HasErrorPrefix(err, "TIMERQ_INUSE") {
		return false, errorf("%w: namespace %q cannot become %d shards: %w: it holds timers or schedules in the default one-shard layout (%s); create the shards in a new namespace and copy the timers into it (List, then Restore) and the schedules (Recurring().List, then Recurring().RestoreWith)",
			ErrShardMismatch, ns, shards, ErrNamespaceInUse, strings.TrimPrefix(err.Error(), "TIMERQ_INUSE "))
	}
	if err != nil {
		q := &Queue{opts: Options{Namespace: ns}}
		return false, errorf("create namespace %q: %w", ns, q.redisError(err))
	}
	if len(v) != 2 {
		return false, errorf("create namespace %q: unexpected reply %v", ns, v)
	}
	if int(v[0]) != shards {
		return false, fmt.Errorf("%w: namespace %q exists with %d shards; changing the shard count of a live namespace is not supported yet (docs/operations.md says how to move to a new namespace)",
			ErrShardMismatch, ns, v[0])
	}
	if v[1] == 1 && shards > 1 {
		// Endpoints put before the namespace was created are in its
		// endpoints hash only: give every shard their names, so timers
		// scheduled on any shard may name them.
		if err := indexEndpoints(ctx, rdb, ns, shards); err != nil {
			return true, err
		}
	}
	return v[1] == 1, nil
}

// indexEndpoints writes the names of the namespace's endpoints into the
// endpoint names of each of its shards shards.
func indexEndpoints(ctx context.Context, rdb redis.UniversalClient, ns string, shards int) error {
	names, err := rdb.HKeys(ctx, keyspace.Namespace(ns).Endpoints()).Result()
	if err != nil || len(names) == 0 {
		if err != nil {
			q := &Queue{opts: Options{Namespace: ns}}
			return errorf("created namespace %q, but could not read its endpoints: %w; put each endpoint again (Endpoints().Put)", ns, q.redisError(err))
		}
		return nil
	}
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sp := range keyspace.Shards(ns, shards) {
			for _, n := range names {
				p.HSet(ctx, sp.EndpointNames(), n, "1")
			}
		}
		return nil
	})
	if err != nil {
		q := &Queue{opts: Options{Namespace: ns}}
		return errorf("created namespace %q, but could not index its endpoints in every shard: %w; put each endpoint again (Endpoints().Put)", ns, q.redisError(err))
	}
	return nil
}

// Shards returns the namespace's shard count, reading it from Redis on
// first use and again when the last read is a second old or more.
func (in Inspector) Shards(ctx context.Context) (int, error) {
	q := in.q
	l, err := q.layout(ctx)
	if err != nil {
		return 0, err
	}
	return len(l.spaces), nil
}

// Created reports whether the namespace was created by CreateNamespace
// (it has a meta key), as last read with the layout. A namespace
// used without being created has one shard and reads false.
func (in Inspector) Created(ctx context.Context) (bool, error) {
	q := in.q
	l, err := q.layout(ctx)
	if err != nil {
		return false, err
	}
	return l.created, nil
}

// ShardedPubSub reports whether the queue uses sharded pub/sub
// (SPUBLISH/SSUBSCRIBE). It reads the layout from Redis on first use.
func (en Engine) ShardedPubSub(ctx context.Context) (bool, error) {
	q := en.q
	l, err := q.layout(ctx)
	if err != nil {
		return false, err
	}
	return l.sharded, nil
}

// ShardOf returns the shard of the timer id.
func (in Inspector) ShardOf(ctx context.Context, id string) (int, error) {
	q := in.q
	l, err := q.layout(ctx)
	if err != nil {
		return 0, err
	}
	return l.shardOf(id), nil
}

// shardErr names the shard in an error when the namespace has several.
func shardErr(l *layout, k int, err error) error {
	if len(l.spaces) == 1 {
		return err
	}
	return errorf("shard %d: %w", k, err)
}
