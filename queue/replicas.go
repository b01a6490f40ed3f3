package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/sleep"
	"github.com/timerq/timerq/scripts/lua"
)

// MaxReplicas is the largest replicas setting SetReplicas takes.
const MaxReplicas = 16

// DefaultReplicaTimeout bounds each WAIT of a namespace with replicas when
// Options.ReplicaTimeout is 0.
const DefaultReplicaTimeout = time.Second

// ErrNotReplicated means that in a namespace with replicas (SetReplicas)
// fewer replicas than the setting asks acknowledged a write within
// Options.ReplicaTimeout.
//
// From Schedule (and the other calls that create timers) it means the
// outcome is unknown, and the error wraps ErrOutcomeUnknown too: the timers
// are written on the master, but a failover now may lose them. Retrying with the same IDs is safe: scheduling is
// idempotent by ID, so the retry creates a timer that was lost and returns
// one that was kept. From a claim it means nothing fired: the claim's
// decision is taken over by the next claim of the shard.
var ErrNotReplicated = errors.New("timerq: too few replicas acknowledged the write")

// ErrTooFewReplicas means a Redis master serving a namespace's shards has
// too few replicas in sync for the replicas setting asked (SetReplicas):
// a setting of N needs N + 1 on every master, N for WAIT N to succeed and
// one to spare, so that the replica promoted when the master fails still
// has N. A master with exactly N fires and schedules until its first
// failover, and then not at all until another replica follows the new
// master: its acknowledged timers stop firing and schedules fail as
// "outcome unknown" (ErrNotReplicated).
var ErrTooFewReplicas = errors.New("timerq: too few replicas for the replicas setting")

// ErrReplicasUnread means SetReplicas could not check a replicas setting
// against the masters' replicas, because it could not read them (INFO
// replication): the Redis user lacks +info, a master is unreachable, or
// the server does not report replication (miniredis). Nothing was
// written; ReplicasOptions.Force skips the check.
var ErrReplicasUnread = errors.New("timerq: cannot read the masters' replicas")

// ReplicasOptions are the options of SetReplicas.
type ReplicasOptions struct {
	// Force sets the setting without reading the masters' replicas, even
	// where a master has N or fewer in sync (ErrTooFewReplicas): for
	// whoever knows that more replicas are on their way, or accepts that
	// a master's failover stops its shards until another replica follows
	// the new master.
	Force bool
}

// MasterReplicas is one Redis master that serves shards of a namespace,
// and how many replicas it has in sync.
type MasterReplicas struct {
	// Addr is the master's address as the client reaches it (host:port);
	// "FailoverClient" for a Sentinel client's master.
	Addr string
	// Replicas counts the master's replicas in sync: the ones INFO
	// replication lists with state=online, which are the ones that can
	// acknowledge a WAIT.
	Replicas int
	// Shards are the namespace's shards whose keys the master serves.
	Shards []int
}

// SetReplicas sets namespace ns's replicas setting to n (0..MaxReplicas),
// storing it beside the shard count in the namespace's meta key, where
// every client and worker reads it on first use. With n > 0:
//
//   - a fire becomes visible (a fire stream entry, a wakeup, the record
//     marked fired) only after n replicas have the claim that decided it,
//     so that a fire seen on a master that then fails is never followed by
//     a second, different fire of the same timer (docs/guarantees.md);
//   - Schedule returns only after n replicas have the new timers (WAIT),
//     and otherwise an error wrapping ErrNotReplicated.
//
// Each Redis master then needs n replicas in sync to fire and schedule at
// all, and one more to go on after its failover: unless opts.Force is set,
// SetReplicas reads each master's replicas (INFO replication) and refuses
// with ErrTooFewReplicas, naming the masters and their counts, when a
// master serving the namespace has n or fewer (nil opts is the zero
// ReplicasOptions). The Redis user needs +wait (and +info, which every
// role in docs/security.md has). n = 0 turns the setting off. Queues
// re-read the setting at most once a second, with the shard count, so
// workers and applications follow a change within about a second, without
// a restart. A namespace that was never created is created with one shard.
func SetReplicas(ctx context.Context, rdb redis.UniversalClient, ns string, n int, opts *ReplicasOptions) error {
	if err := replicasArgs(rdb, ns, n); err != nil {
		return err
	}
	shards, _, created, err := readMeta(ctx, rdb, ns)
	if err != nil {
		q := &Queue{opts: Options{Namespace: ns}}
		return errorf("set replicas of namespace %q: %w", ns, q.redisError(err))
	}
	if err := mastersHaveReplicas(ctx, rdb, ns, shards, n, opts); err != nil {
		return err
	}
	if !created {
		if _, err := CreateNamespace(ctx, rdb, ns, shards); err != nil {
			return err
		}
	}
	if err := rdb.HSet(ctx, keyspace.Namespace(ns).Meta(), "replicas", n).Err(); err != nil {
		q := &Queue{opts: Options{Namespace: ns}}
		return errorf("set replicas of namespace %q: %w", ns, q.redisError(err))
	}
	return nil
}

// CheckReplicas returns the error SetReplicas would refuse a replicas
// setting of n with, were namespace ns laid out in shards shards, and
// writes nothing: for a caller that creates a namespace and sets its
// replicas in one step (timerctl namespace create --replicas), so that a
// refused setting leaves no namespace behind. It checks the masters that
// the shards' keys would live on, which on a Cluster may be more than the
// one the default layout of a namespace not yet created uses.
// SetReplicas checks again, against the layout it finds.
func CheckReplicas(ctx context.Context, rdb redis.UniversalClient, ns string, shards, n int, opts *ReplicasOptions) error {
	if err := replicasArgs(rdb, ns, n); err != nil {
		return err
	}
	if shards < 1 || shards > MaxShards {
		return fmt.Errorf("%w: %d shards is outside 1..%d", ErrInvalidOptions, shards, MaxShards)
	}
	return mastersHaveReplicas(ctx, rdb, ns, shards, n, opts)
}

// replicasArgs refuses what SetReplicas refuses before it reads Redis.
func replicasArgs(rdb redis.UniversalClient, ns string, n int) error {
	if rdb == nil {
		return fmt.Errorf("%w: pass a client from redis.NewClient, redis.NewUniversalClient or similar", ErrNilClient)
	}
	if err := ValidateNamespace(ns); err != nil {
		return err
	}
	if n < 0 || n > MaxReplicas {
		return fmt.Errorf("%w: replicas %d is outside 0..%d", ErrInvalidOptions, n, MaxReplicas)
	}
	if n > 0 {
		return checkReplicaClient(rdb)
	}
	return nil
}

// mastersHaveReplicas reads the replicas of each master serving the
// namespace's shards (unless opts.Force) and refuses a setting of n that
// TooFewReplicas refuses.
func mastersHaveReplicas(ctx context.Context, rdb redis.UniversalClient, ns string, shards, n int, opts *ReplicasOptions) error {
	if n == 0 || (opts != nil && opts.Force) {
		return nil
	}
	ms, err := masterReplicas(ctx, rdb, keyspace.Shards(ns, shards))
	if err != nil {
		q := &Queue{opts: Options{Namespace: ns}}
		return errorf("set replicas of namespace %q: %w (INFO replication): %w; grant +info, or skip the check if the masters have their replicas (ReplicasOptions.Force)",
			ns, ErrReplicasUnread, q.redisError(err))
	}
	return TooFewReplicas(ns, ms, n)
}

// Replicas returns the namespace's replicas setting (SetReplicas), as the
// queue last read it with the shard count (at most a second ago, or by a
// poller's heartbeat); 0 when it is off.
func (in Inspector) Replicas(ctx context.Context) (int, error) {
	q := in.q
	l, err := q.layout(ctx)
	if err != nil {
		return 0, err
	}
	return l.replicas, nil
}

// MasterReplicas reads, for each Redis master that serves the namespace's
// shards, how many replicas it has in sync (INFO replication), in the
// order of the first shard each serves. On a Cluster the masters are the
// ones the client's slot map names now; a Sentinel or standalone client
// has one. It needs a client SetReplicas takes.
func (in Inspector) MasterReplicas(ctx context.Context) ([]MasterReplicas, error) {
	q := in.q
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := masterReplicas(ctx, q.rdb, l.spaces)
	if err != nil {
		return nil, errorf("read the masters' replicas: %w", q.redisError(err))
	}
	return ms, nil
}

// TooFewReplicasError is the error of TooFewReplicas: the masters that
// have too few replicas in sync for the setting. It wraps
// ErrTooFewReplicas.
type TooFewReplicasError struct {
	Namespace string
	// Setting is the replicas setting asked for (N); every master needs
	// N + 1 replicas in sync.
	Setting int
	// Short are the masters with N replicas or fewer.
	Short []MasterReplicas
}

// MaxSetting is the largest setting the masters allow: the fewest
// replicas of the short masters, less the spare; 0 when none fits.
func (e *TooFewReplicasError) MaxSetting() int {
	fewest := e.Setting
	for _, m := range e.Short {
		fewest = min(fewest, m.Replicas)
	}
	return max(fewest-1, 0)
}

// Problem says which masters have too few replicas, and why that is too
// few, without the fix.
func (e *TooFewReplicasError) Problem() string {
	short := make([]string, len(e.Short))
	for i, m := range e.Short {
		short[i] = fmt.Sprintf("master %s has %s in sync (%s)", m.Addr, countOf(m.Replicas, "replica"), countOf(len(m.Shards), "shard"))
	}
	n := e.Setting
	return fmt.Sprintf("%v: namespace %q with replicas %d needs %d replicas in sync on every master (%d for WAIT %d, and one so that the replica a failover promotes still has %d), but %s",
		ErrTooFewReplicas, e.Namespace, n, n+1, n, n, n, strings.Join(short, ", "))
}

// Fix says what to do, with force naming how the caller overrides the
// check ("ReplicasOptions.Force", "--force").
func (e *TooFewReplicasError) Fix(force string) string {
	lower := "turn the setting off (0)"
	if m := e.MaxSetting(); m > 0 {
		lower = fmt.Sprintf("use a setting of at most %d", m)
	}
	return fmt.Sprintf("add replicas until every master has %d, or %s, or set it anyway with %s if a master's failover may stop its shards until another replica follows the new master",
		e.Setting+1, lower, force)
}

// Error is Problem and Fix, in Go's words.
func (e *TooFewReplicasError) Error() string {
	return e.Problem() + "; " + e.Fix("ReplicasOptions.Force")
}

// Unwrap returns ErrTooFewReplicas.
func (e *TooFewReplicasError) Unwrap() error { return ErrTooFewReplicas }

// TooFewReplicas returns a *TooFewReplicasError naming each master of ms
// with n replicas in sync or fewer, or nil when each has more or n is 0:
// the rule SetReplicas refuses by, and workers warn by.
func TooFewReplicas(ns string, ms []MasterReplicas, n int) error {
	if n <= 0 {
		return nil
	}
	var short []MasterReplicas
	for _, m := range ms {
		if m.Replicas <= n {
			short = append(short, m)
		}
	}
	if short == nil {
		return nil
	}
	return &TooFewReplicasError{Namespace: ns, Setting: n, Short: short}
}

// countOf is "1 replica", "2 replicas".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// masterReplicas reads the replicas in sync of each master serving one of
// spaces, one INFO replication per master.
func masterReplicas(ctx context.Context, rdb redis.UniversalClient, spaces []keyspace.Space) ([]MasterReplicas, error) {
	if err := checkReplicaClient(rdb); err != nil {
		return nil, err
	}
	var out []MasterReplicas
	conns := map[string]*redis.Client{}
	index := map[string]int{}
	for k, sp := range spaces {
		var c *redis.Client
		switch r := rdb.(type) {
		case *redis.ClusterClient:
			var err error
			if c, err = r.MasterForKey(ctx, sp.Due()); err != nil {
				return nil, err
			}
		case *redis.Client:
			c = r
		}
		addr := c.Options().Addr
		i, ok := index[addr]
		if !ok {
			i = len(out)
			index[addr], conns[addr] = i, c
			out = append(out, MasterReplicas{Addr: addr})
		}
		out[i].Shards = append(out[i].Shards, k)
	}
	for i := range out {
		info, err := conns[out[i].Addr].Info(ctx, "replication").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO replication on %s: %w", out[i].Addr, err)
		}
		n, err := replicasInSync(info)
		if err != nil {
			return nil, fmt.Errorf("INFO replication on %s: %w", out[i].Addr, err)
		}
		out[i].Replicas = n
	}
	return out, nil
}

// replicasInSync counts the replicas that INFO replication's reply lists
// with state=online: the ones that acknowledge WAIT. A replica still
// loading its first copy (wait_bgsave, send_bulk) is connected but cannot.
func replicasInSync(info string) (int, error) {
	role, n := "", 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "role:"); ok {
			role = v
			continue
		}
		name, v, ok := strings.Cut(line, ":")
		if id, isReplica := strings.CutPrefix(name, "slave"); ok && isReplica && id != "" && strings.Trim(id, "0123456789") == "" &&
			strings.Contains(","+v+",", ",state=online,") {
			n++
		}
	}
	if role != "master" {
		return 0, fmt.Errorf("the server is not a master (role %q): it answered as a replica, or does not report replication", role)
	}
	return n, nil
}

// checkReplicaClient refuses a client on which a script and the WAIT after
// it cannot share one connection to the shard's master.
func checkReplicaClient(rdb redis.UniversalClient) error {
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
		return nil
	}
	return fmt.Errorf("%w: a namespace with replicas needs a standalone, Sentinel or Cluster client (redis.NewClient, redis.NewFailoverClient, redis.NewClusterClient or redis.NewUniversalClient), not %T",
		ErrInvalidOptions, rdb)
}

// holdLease is how long a claim's decision is its own to commit: two WAITs
// and a second of slack.
func (o Options) holdLease() time.Duration { return 2*o.ReplicaTimeout + time.Second }

// shardConn returns a client of shard k's master alone, so that a script
// and the WAIT after it run on one connection (WAIT waits for the writes
// of its own connection).
func (q *Queue) shardConn(ctx context.Context, l *layout, k int) (*redis.Client, error) {
	switch c := q.rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, l.spaces[k].Due())
	case *redis.Client:
		return c, nil
	}
	return nil, checkReplicaClient(q.rdb)
}

// runWait runs script s on shard k and then WAIT for the namespace's
// replicas, pipelined on one connection to the shard's master, and returns
// the script's reply and how many replicas acknowledged its writes. A
// script refused because the shard's slot moved is retried, for a few
// seconds, with the slot map reloaded.
func (q *Queue) runWait(ctx context.Context, l *layout, s *lua.Script, k int, args ...any) (any, int, error) {
	return q.runWaitKeys(ctx, l, s, k, "", args...)
}

// runWaitKeys is runWait with the keys the table gives for group (see
// layout.keysFor).
func (q *Queue) runWaitKeys(ctx context.Context, l *layout, s *lua.Script, k int, group string, args ...any) (any, int, error) {
	loaded, fn := false, q.functions()
	for attempt := 1; ; attempt++ {
		sent := l.layoutOf(k)
		rs, keys := l.script(s, k), l.keysFor(s, k, group)
		conn, err := q.shardConn(ctx, l, k)
		if err != nil {
			return nil, 0, shardErr(l, k, q.redisError(err))
		}
		var ev *redis.Cmd
		var wait *redis.IntCmd
		_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			ev = q.scriptCmd(ctx, p, rs, fn, keys, args...)
			wait = redis.NewIntCmd(ctx, "wait", l.replicas, q.opts.ReplicaTimeout.Milliseconds())
			_ = p.Process(ctx, wait)
			return nil
		})
		err = ev.Err()
		retry := q.retryable(err, fn)
		switch {
		case err == nil:
			if werr := wait.Err(); werr != nil {
				// A demoted master refuses WAIT: its writes count as
				// acknowledged by none.
				return ev.Val(), 0, nil
			}
			return ev.Val(), int(wait.Val()), nil
		case l.upgraded(k, sent, err):
			loaded = false // the layout-2 build may need loading
			continue
		case retry == retryLoad && !loaded:
			if err := q.loadScript(ctx, conn, rs); err != nil {
				return nil, 0, shardErr(l, k, q.redisError(err))
			}
			loaded, fn = true, fn && q.functions()
			continue
		case retry == retryEval:
			fn = false // the function did not run; the script may
			continue
		case migrating(err) && attempt < migrationAttempts:
			if c, ok := q.rdb.(*redis.ClusterClient); ok {
				c.ReloadState(ctx)
			}
			if sleep.For(ctx, migrationBackoff(attempt)) {
				continue
			}
		}
		return nil, 0, shardErr(l, k, q.redisError(err))
	}
}

// notReplicated is the error of a write that too few replicas acknowledged.
func (q *Queue) notReplicated(l *layout, what string, acks int) error {
	return fmt.Errorf("%w: %s: %d of the %d replicas that namespace %q asks for acknowledged it within %v",
		ErrNotReplicated, what, acks, l.replicas, q.opts.Namespace, q.opts.ReplicaTimeout)
}

// newToken returns a claim's token: 16 random bytes, hex.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// claimHeld is claimOnce in a namespace with replicas: hold.lua decides
// the claim, WAIT makes sure the replicas have the decision, and only then
// commit.lua makes the fires visible. A decision whose WAIT fell short is
// not committed; this Queue's next claim of the shard takes it over at
// once, anyone else's once its lease ends.
func (q *Queue) claimHeld(ctx context.Context, l *layout, k, limit int) (res ClaimResult, tps []string, _ error) {
	token := newToken()
	mine, _ := q.gaveUp.Load(k)
	mineTok, _ := mine.(string)
	reply, acks, err := q.runWait(ctx, l, lua.Hold, k, limit, q.opts.holdLease().Milliseconds(), token, mineTok)
	if err != nil {
		return ClaimResult{}, nil, errorf("claim: %w", err)
	}
	r, err := replyStrings(reply)
	if err != nil || len(r) < 4 {
		return ClaimResult{}, nil, errorf("claim: unexpected reply %v", reply)
	}
	nq := int(atoi(r[3]))
	if nq < 0 || len(r) != 4+2*nq {
		return ClaimResult{}, nil, errorf("claim: unexpected reply %v", reply)
	}
	res = ClaimResult{Shard: k, Now: fromMillis(atoi(r[0]))}
	if r[1] != "" {
		res.NextDue = parseScore(r[1])
	}
	for i := range nq {
		res.Quarantined = append(res.Quarantined, QuarantineNotice{ID: r[4+2*i], Shard: k, Reason: r[5+2*i]})
	}
	if r[2] != "held" {
		return res, nil, nil // 'none', or 'busy' until NextDue, the lease's end
	}
	if acks < l.replicas {
		q.gaveUp.Store(k, token)
		return res, nil, shardErr(l, k, errorf("claim: %w; nothing fired, and the next claim retries",
			q.notReplicated(l, "the claim's decision", acks)))
	}
	reply, err = q.runTries(ctx, l, lua.Commit, k, 1, token, q.opts.retentionMillis(), q.opts.streamMaxLen(),
		l.spaces[k].TimerChannelPrefix())
	if err != nil {
		// Committed or not, the next claim of this Queue takes the
		// decision over (a committed one is gone).
		q.gaveUp.Store(k, token)
		return res, nil, errorf("claim: commit: %w", err)
	}
	q.gaveUp.CompareAndDelete(k, mineTok)
	r, err = replyStrings(reply)
	if err != nil || len(r) < 3 || (len(r)-3)%4 != 0 {
		return res, nil, errorf("claim: commit: unexpected reply %v", reply)
	}
	if r[2] != "ok" {
		// Another claimer took the decision over: claim again soon.
		res.NextDue = res.Now
		return res, nil, nil
	}
	firedAt := fromMillis(atoi(r[0]))
	res.NextDue = time.Time{}
	if r[1] != "" {
		res.NextDue = parseScore(r[1])
	}
	r = r[3:]
	if n := len(r) / 4; n > 0 {
		res.Fired = make([]Fired, n)
		for i := range res.Fired {
			f := r[4*i:]
			res.Fired[i] = Fired{ID: f[0], Due: fromMillis(atoi(f[1])), FiredAt: firedAt, Payload: []byte(f[2])}
			if f[3] != "" {
				if tps == nil {
					tps = make([]string, n)
				}
				tps[i] = f[3]
			}
		}
	}
	return res, tps, nil
}

// scheduleWait is the schedule step of scheduleBatch in a namespace with
// replicas: each call, then WAIT, on the shard's master. It stops at the
// first call that fails: errs[i] is call i's error, and the calls after
// it, which were not sent, have the same.
func (q *Queue) scheduleWait(ctx context.Context, l *layout, calls []call) (out []any, errs []error) {
	out, errs = make([]any, len(calls)), make([]error, len(calls))
	for i, c := range calls {
		reply, acks, err := q.runWait(ctx, l, lua.Schedule, c.shard, c.args...)
		if err == nil && acks < l.replicas {
			err = shardErr(l, c.shard, fmt.Errorf("%w; retry with the same IDs, which is safe",
				q.notReplicated(l, "the new timers", acks)))
		}
		if err != nil {
			for j := i; j < len(calls); j++ {
				errs[j] = err
			}
			return out, errs
		}
		out[i] = reply
	}
	return out, errs
}
