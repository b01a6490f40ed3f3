package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
)

// ErrQuotaExceeded means a call would take a namespace past one of its
// quotas (SetQuotas): the error is a *QuotaError naming the quota, its
// limit and the usage. Nothing was written.
var ErrQuotaExceeded = errors.New("timerq: namespace quota exceeded")

// Quotas are a namespace's size limits, set by its admin (SetQuotas) and
// stored in its meta key. Each is the most the namespace may hold; 0 means
// unlimited. The scripts that add check them atomically, before their
// first write, so they hold however many replicas of the application and
// API write at once; what was there before a quota was lowered stays.
type Quotas struct {
	// Pending is the most scheduled timers (Stats.Scheduled), the armed
	// occurrences of recurring schedules included. Schedule,
	// ScheduleBatch, Restore and Debounce refuse to create timers past
	// it; the workers still arm occurrences of existing schedules.
	Pending int64 `json:"pending"`
	// Endpoints is the most delivery endpoints (Endpoints.Put refuses a
	// new one past it; replacing one is always allowed).
	Endpoints int64 `json:"endpoints"`
	// Schedules is the most recurring schedules, paused ones included
	// (Recurring().Put refuses a new one past it).
	Schedules int64 `json:"schedules"`
}

// DefaultQuotas are the quotas of a namespace whose admin set none. They
// are meant to stop a runaway client or a leaked token long before
// Redis runs out of memory, not to bind a normal workload: raise them
// with SetQuotas (timerctl namespace quotas, PUT
// /v1/namespaces/{ns}/quotas).
var DefaultQuotas = Quotas{Pending: 1_000_000, Endpoints: 100, Schedules: 10_000}

// MaxQuota is the largest value a quota may be set to.
const MaxQuota = 1 << 50

// The meta key's fields of each quota; a missing field is the default.
const (
	quotaPendingField   = "quota_pending"
	quotaEndpointsField = "quota_endpoints"
	quotaSchedulesField = "quota_schedules"
)

// The names of the quotas, as a QuotaError, the API and timerctl give
// them.
const (
	QuotaPending   = "pending"
	QuotaEndpoints = "endpoints"
	QuotaSchedules = "schedules"
)

// QuotaError is the error of a call refused by a quota; it wraps
// ErrQuotaExceeded.
type QuotaError struct {
	// Namespace is the namespace whose quota refused the call.
	Namespace string
	// Quota names the quota: QuotaPending, QuotaEndpoints or
	// QuotaSchedules.
	Quota string
	// Limit is the namespace's quota.
	Limit int64
	// Usage is what the namespace held when the call was refused; for a
	// quota checked per shard (Shards > 1), what that shard held.
	Usage int64
	// Adding is how many the refused call would have added (to that
	// shard).
	Adding int64
	// Shards is the namespace's shard count; with more than one, pending
	// timers and schedules are limited per shard, to ShardLimit each.
	Shards int
	// ShardLimit is the limit the shard was checked against:
	// ceil(Limit/Shards), or Limit for endpoints and unsharded namespaces.
	ShardLimit int64
}

// Error says which quota refused the call, with the numbers, that nothing
// was written, and what to do.
func (e *QuotaError) Error() string {
	what := map[string]string{QuotaPending: "pending timers", QuotaEndpoints: "endpoints",
		QuotaSchedules: "recurring schedules"}[e.Quota]
	holds := fmt.Sprintf("it holds %d", e.Usage)
	if e.ShardLimit != e.Limit {
		holds = fmt.Sprintf("its quota is checked per shard, %d in each of its %d shards, and the shard holds %d",
			e.ShardLimit, e.Shards, e.Usage)
	}
	return fmt.Sprintf("%s: the %s quota of namespace %q is %d %s; %s and the call would add %d, so nothing was written; "+
		"remove some first, or have the namespace's admin raise the quota (SetQuotas, or PUT /v1/namespaces/%s/quotas)",
		ErrQuotaExceeded.Error(), e.Quota, e.Namespace, e.Limit, what, holds, e.Adding, e.Namespace)
}

// Unwrap returns ErrQuotaExceeded, for errors.Is.
func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// ValidateQuotas refuses a quota below 0 or above MaxQuota; errors wrap
// ErrInvalidOptions.
func ValidateQuotas(q Quotas) error {
	for _, f := range []struct {
		name string
		v    int64
	}{{QuotaPending, q.Pending}, {QuotaEndpoints, q.Endpoints}, {QuotaSchedules, q.Schedules}} {
		if f.v < 0 || f.v > MaxQuota {
			return fmt.Errorf("%w: the %s quota %d is outside 0..%d (0 means unlimited)", ErrInvalidOptions, f.name, f.v, int64(MaxQuota))
		}
	}
	return nil
}

// SetQuotas stores namespace ns's quotas, all three (start from
// NamespaceQuotas to change one). 0 means unlimited. Every queue of the
// namespace reads them at most a second later (quotaTTL). It writes the
// namespace's meta key without creating the namespace: a namespace
// created later keeps them.
func SetQuotas(ctx context.Context, rdb redis.UniversalClient, ns string, q Quotas) error {
	if rdb == nil {
		return fmt.Errorf("%w: pass a client from redis.NewClient, redis.NewUniversalClient or similar", ErrNilClient)
	}
	if err := ValidateNamespace(ns); err != nil {
		return err
	}
	if err := ValidateQuotas(q); err != nil {
		return err
	}
	err := rdb.HSet(ctx, keyspace.Namespace(ns).Meta(), quotaPendingField, q.Pending,
		quotaEndpointsField, q.Endpoints, quotaSchedulesField, q.Schedules).Err()
	if err != nil {
		qq := &Queue{opts: Options{Namespace: ns}}
		return errorf("set the quotas of namespace %q: %w", ns, qq.redisError(err))
	}
	return nil
}

// NamespaceQuotas returns namespace ns's quotas as stored, with
// DefaultQuotas for those never set.
func NamespaceQuotas(ctx context.Context, rdb redis.UniversalClient, ns string) (Quotas, error) {
	if rdb == nil {
		return Quotas{}, fmt.Errorf("%w: pass a client from redis.NewClient, redis.NewUniversalClient or similar", ErrNilClient)
	}
	if err := ValidateNamespace(ns); err != nil {
		return Quotas{}, err
	}
	q, err := readQuotas(ctx, rdb, ns)
	if err != nil {
		qq := &Queue{opts: Options{Namespace: ns}}
		return Quotas{}, errorf("read the quotas of namespace %q: %w", ns, qq.redisError(err))
	}
	return q, nil
}

// readQuotas reads the quotas from the meta key: one HMGET.
func readQuotas(ctx context.Context, rdb redis.UniversalClient, ns string) (Quotas, error) {
	meta := keyspace.Namespace(ns).Meta()
	v, err := rdb.HMGet(ctx, meta, quotaPendingField, quotaEndpointsField, quotaSchedulesField).Result()
	if err != nil {
		return Quotas{}, err
	}
	if len(v) != 3 {
		return Quotas{}, fmt.Errorf("HMGET %s replied %v", meta, v)
	}
	q := DefaultQuotas
	for i, p := range []*int64{&q.Pending, &q.Endpoints, &q.Schedules} {
		s, ok := v[i].(string)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return Quotas{}, fmt.Errorf("%w: the meta key %s holds a quota %q, not a count: something else wrote it; set the quotas again",
				ErrMalformedRecord, meta, s)
		}
		*p = n
	}
	return q, nil
}

// Quotas returns the namespace's quotas as this queue last read them (at
// most quotaTTL ago).
func (in Inspector) Quotas(ctx context.Context) (Quotas, error) {
	return in.q.quotas(ctx)
}

// quotaTTL is how long a Queue trusts the quotas it read, as layoutTTL
// for the layout: a change reaches every client within about a second.
var quotaTTL = time.Second

// quotaCache keeps a Queue's copy of its namespace's quotas.
type quotaCache struct {
	mu sync.Mutex
	at time.Time
	q  Quotas
}

// quotas returns the namespace's quotas, read at most once per quotaTTL.
func (q *Queue) quotas(ctx context.Context) (Quotas, error) {
	c := &q.quota
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < quotaTTL {
		return c.q, nil
	}
	v, err := readQuotas(ctx, q.rdb, q.opts.Namespace)
	if err != nil {
		return Quotas{}, errorf("read the quotas of namespace %q: %w", q.opts.Namespace, q.redisError(err))
	}
	c.q, c.at = v, time.Now()
	return v, nil
}

// shardQuota is the limit a script checks on one shard of a namespace of
// shards shards: ceil(limit/shards), so that the shards together hold at
// most about limit (each shard's script sees only its own keys); 0
// (unlimited) stays 0.
func shardQuota(limit int64, shards int) int64 {
	if limit <= 0 || shards <= 1 {
		return limit
	}
	return (limit + int64(shards) - 1) / int64(shards)
}

// quotaError turns a script's refusal "TIMERQ_QUOTA <quota> <shard limit>
// <usage> <adding>" into a *QuotaError.
func (q *Queue) quotaError(msg string) error {
	f := strings.Fields(msg)
	if len(f) < 4 {
		return fmt.Errorf("%w: %s", ErrQuotaExceeded, msg)
	}
	e := &QuotaError{Namespace: q.opts.Namespace, Quota: f[0], Shards: max(1, len(q.known().spaces))}
	e.ShardLimit, _ = strconv.ParseInt(f[1], 10, 64)
	e.Usage, _ = strconv.ParseInt(f[2], 10, 64)
	e.Adding, _ = strconv.ParseInt(f[3], 10, 64)
	e.Limit = e.ShardLimit
	if e.Quota != QuotaEndpoints && e.Shards > 1 {
		c := &q.quota
		c.mu.Lock()
		lim := map[string]int64{QuotaPending: c.q.Pending, QuotaSchedules: c.q.Schedules}[e.Quota]
		c.mu.Unlock()
		e.Limit = e.ShardLimit * int64(e.Shards)
		if shardQuota(lim, e.Shards) == e.ShardLimit {
			e.Limit = lim
		}
	}
	return e
}

// Usage is a namespace's usage against each of its quotas.
type Usage struct {
	// Quotas are the namespace's quotas (0: unlimited).
	Quotas Quotas
	// Pending counts the scheduled timers, Endpoints the endpoints and
	// Schedules the recurring schedules.
	Pending, Endpoints, Schedules int64
	// MaxShardPending and MaxShardSchedules are the fullest shard's
	// counts, which a sharded namespace's quotas limit (shardQuota); the
	// same as Pending and Schedules with one shard.
	MaxShardPending, MaxShardSchedules int64
}

// Usage reads the namespace's usage against its quotas in one pipeline:
// ZCARD of each shard's due set, HLEN of the endpoints hash and of each
// shard's schedules hash.
func (in Inspector) Usage(ctx context.Context) (Usage, error) {
	q := in.q
	quotas, err := q.quotas(ctx)
	if err != nil {
		return Usage{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return Usage{}, err
	}
	due := make([]*redis.IntCmd, len(l.spaces))
	sched := make([]*redis.IntCmd, len(l.spaces))
	var eps *redis.IntCmd
	q.learnLayouts(ctx, l)
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, sp := range l.spaces {
			due[k] = p.ZCount(ctx, l.space(k).Due(), "-inf", PendingEnd)
			sched[k] = p.HLen(ctx, sp.Schedules())
		}
		eps = p.HLen(ctx, keyspace.Namespace(q.opts.Namespace).Endpoints())
		return nil
	})
	if err != nil {
		return Usage{}, errorf("usage: %w", q.redisError(err))
	}
	u := Usage{Quotas: quotas, Endpoints: eps.Val()}
	for k := range l.spaces {
		d, s := due[k].Val(), sched[k].Val()
		u.Pending += d
		u.Schedules += s
		u.MaxShardPending = max(u.MaxShardPending, d)
		u.MaxShardSchedules = max(u.MaxShardSchedules, s)
	}
	return u, nil
}
