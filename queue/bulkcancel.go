package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	lua "github.com/timerq/timerq/scripts/lua"
)

// Bulk cancel: CancelMatching cancels every scheduled timer a filter
// selects. Every bulk cancel is a job (CancelJob) with a record in the
// namespace's slot and, on each shard, a progress hash that the script of
// a step (cancel_batch.lua) advances in the same atomic call as the cancels
// it makes. A small job ends in the call; a large one is handed to the
// workers, which run it under a lease (Engine.RunCancelJobs), and any
// worker resumes it where the last step left it.

// CancelFilter selects the timers of a bulk cancel: a timer is selected
// when it matches every field given. At least one of IDPrefix, Owner and
// Labels is required: a bulk cancel of every timer is not offered.
type CancelFilter struct {
	// IDPrefix selects the timers whose ID starts with it, byte for byte
	// (glob characters are not special).
	IDPrefix string
	// Owner selects the owner's timers (NewTimer.Owner), through the
	// owner index: a step reads only that owner's timers.
	Owner string
	// Labels selects the timers that carry every label given, key and
	// value. Without an Owner, a job visits every timer that has an owner,
	// labels or a deadline.
	Labels map[string]string
	// EpochBelow, when not 0, selects only timers scheduled under an
	// epoch of their owner below it (BumpOptions.CancelOlder). It needs
	// Owner.
	EpochBelow uint64
}

// Validate reports whether f selects some timers by a valid field. The
// error wraps ErrInvalidFilter.
func (f CancelFilter) Validate() error {
	if f.IDPrefix == "" && f.Owner == "" && len(f.Labels) == 0 {
		return fmt.Errorf("%w: the filter is empty; give an ID prefix, an owner or labels that the timers to cancel share (timerq does not cancel every timer at once)", ErrInvalidFilter)
	}
	if f.IDPrefix != "" {
		if err := ValidateID(f.IDPrefix); err != nil {
			return fmt.Errorf("%w: the ID prefix: %w", ErrInvalidFilter, err)
		}
	}
	if f.Owner != "" {
		if err := ValidateOwner(f.Owner); err != nil {
			return fmt.Errorf("%w: the owner: %w", ErrInvalidFilter, err)
		}
	} else if f.EpochBelow != 0 {
		// A scan by ID prefix reads records, which hold no epoch: the
		// bound would select every timer of the prefix.
		return fmt.Errorf("%w: an epoch bound selects an owner's timers by the epoch they were scheduled under: give the owner too", ErrInvalidFilter)
	}
	if err := ValidateLabels(f.Labels); err != nil {
		return fmt.Errorf("%w: the labels: %w", ErrInvalidFilter, err)
	}
	return nil
}

// String shows f in one line, the fields given in order, such as
// `ID prefix "order-", owner "wf-42", labels tenant="acme", epoch below 3`:
// what timerctl and the dashboard show of a bulk cancel's filter.
func (f CancelFilter) String() string {
	var parts []string
	if f.IDPrefix != "" {
		parts = append(parts, "ID prefix "+strconv.Quote(f.IDPrefix))
	}
	if f.Owner != "" {
		parts = append(parts, "owner "+strconv.Quote(f.Owner))
	}
	if len(f.Labels) > 0 {
		labels := make([]string, 0, len(f.Labels))
		for _, k := range slices.Sorted(maps.Keys(f.Labels)) {
			labels = append(labels, k+"="+strconv.Quote(f.Labels[k]))
		}
		parts = append(parts, "labels "+strings.Join(labels, " "))
	}
	if f.EpochBelow != 0 {
		parts = append(parts, "epoch below "+strconv.FormatUint(f.EpochBelow, 10))
	}
	return strings.Join(parts, ", ")
}

// running is the set of unfinished jobs that a job of f waits in: a
// filter of more than an ID prefix in a set that workers which predate
// owners do not read (keyspace CancelRunningFiltered).
func (f CancelFilter) running(ns keyspace.Namespace) string {
	if f.Owner != "" || len(f.Labels) > 0 {
		return ns.CancelRunningFiltered()
	}
	return ns.CancelRunning()
}

// match is the HSCAN MATCH pattern of the timers f selects.
func (f CancelFilter) match() string { return keyspace.GlobEscape(f.IDPrefix) + "*" }

// labelsArg is f's labels as cancel_batch.lua takes them: "\x1f<key>=<value>"
// each, in key order.
func (f CancelFilter) labelsArg() string {
	var b strings.Builder
	writeLabels(&b, f.Labels)
	return b.String()
}

// epochArg is f.EpochBelow as cancel_batch.lua takes it: "" for none.
func (f CancelFilter) epochArg() string {
	if f.EpochBelow == 0 {
		return ""
	}
	return strconv.FormatUint(f.EpochBelow, 10)
}

// CancelCounts are what a bulk cancel found among the timers it selected.
type CancelCounts struct {
	// Cancelled is how many scheduled timers the job cancelled.
	Cancelled int64
	// Fired is how many had fired before the job reached them.
	Fired int64
	// AlreadyCancelled is how many had been cancelled before the job
	// reached them (by someone else, or by an earlier bulk cancel).
	AlreadyCancelled int64
	// Skipped is how many records timerq did not write (ErrMalformedRecord)
	// the job left alone.
	Skipped int64
}

// Matched is how many timers the job selected: the sum of the counts.
func (c CancelCounts) Matched() int64 {
	return c.Cancelled + c.Fired + c.AlreadyCancelled + c.Skipped
}

func (c *CancelCounts) add(o CancelCounts) {
	c.Cancelled += o.Cancelled
	c.Fired += o.Fired
	c.AlreadyCancelled += o.AlreadyCancelled
	c.Skipped += o.Skipped
}

// CancelJobState is where a bulk cancel job stands.
type CancelJobState string

// The states of a bulk cancel job.
const (
	// CancelJobRunning: the job has shards left to scan; a worker runs it.
	CancelJobRunning CancelJobState = "running"
	// CancelJobDone: every shard was scanned; the counts are final.
	CancelJobDone CancelJobState = "done"
	// CancelJobFailed: Redis refused a step (a missing ACL right, a key
	// of the wrong type, memory); Error says which. The timers cancelled
	// before stay cancelled; a new CancelMatching with the same filter
	// finishes the work (counting those as AlreadyCancelled).
	CancelJobFailed CancelJobState = "failed"
)

// CancelJob is a bulk cancel: its filter, its state and what it found.
type CancelJob struct {
	// ID names the job (CancelJobs.Get).
	ID string
	// Filter selected its timers.
	Filter CancelFilter
	// State is running, done or failed.
	State CancelJobState
	// Created is when the job started, Finished when it ended (zero while
	// running); both by the Redis server's clock.
	Created, Finished time.Time
	// Error is why a failed job stopped.
	Error string
	// Counts are the job's counts so far; final once it is done.
	Counts CancelCounts
	// Shards is the namespace's shard count, ShardsDone how many of them
	// the job has scanned to the end.
	Shards, ShardsDone int
}

const (
	// CancelInCall is how many selected timers CancelMatching handles in
	// the call: once its steps have selected that many (or it has run
	// for cancelInCallTime, 5 s), it hands the rest of the job to the
	// workers.
	CancelInCall = 10000
	// cancelInCallTime bounds the time CancelMatching spends on a job
	// before it hands it to the workers: scanning a large namespace for a
	// rare prefix takes time even when it selects little.
	cancelInCallTime = 5 * time.Second
	// cancelScanCount is the HSCAN COUNT of one step: how many entries
	// of a shard's timers hash one script call visits (a hash small enough
	// for a listpack, 128 entries by default, comes whole). 100 keeps a
	// step near a millisecond of Redis (0.5-0.8 ms measured, every other
	// entry matching, 20,000 and 100,000 timers, load 7); 500 held Redis
	// for 5-10 ms a step and took as long in all.
	cancelScanCount = 100
	// DefaultCancelLease is how long a runner's lease on a job lasts
	// unless renewed; it renews every third of it. A job whose runner
	// died is resumed by another within about this long.
	DefaultCancelLease = 10 * time.Second
	// cancelListMax is how many jobs CancelJobs.List returns at most.
	cancelListMax = 100
)

// cancelInCall is CancelInCall, lowered by tests.
var cancelInCall int64 = CancelInCall

// cancelStepHook, when a test sets it, is called after each step of a
// job; false stops the runner at once, without releasing its lease, as a
// worker that was killed.
var cancelStepHook atomic.Pointer[func(job string, shard int) bool]

// errRunnerKilled stops a runner that cancelStepHook killed.
var errRunnerKilled = errors.New("timerq: runner stopped by a test")

// CancelMatching cancels every scheduled timer that f selects, on every
// shard, and returns the job it ran. Each selected timer ends cancelled or
// fired, never both: a step reads and cancels its batch in one atomic
// script, and counts a timer that fired (or was cancelled) before as
// such. A timer scheduled while the job runs may or may not be selected.
//
// A job that selects fewer than CancelInCall timers (and ends within 5 s)
// is done when CancelMatching returns (State CancelJobDone, the
// final counts). A larger one is handed to the workers: CancelMatching
// returns it running, with the counts so far, and a timerworker finishes
// it (Engine.RunCancelJobs); follow it with CancelJobs().Get. Jobs are
// kept for Options.Retention after they end.
//
// On an error the job is marked failed, unless Redis could not be reached
// or the context ended, in which case it stays running and the workers
// finish it; the error names the job.
func (q *Queue) CancelMatching(ctx context.Context, f CancelFilter) (CancelJob, error) {
	if err := f.Validate(); err != nil {
		return CancelJob{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return CancelJob{}, err
	}
	now, err := q.rdb.Time(ctx).Result()
	if err != nil {
		return CancelJob{}, errorf("bulk cancel: %w", q.redisError(err))
	}
	created := now.UnixMilli()
	job := CancelJob{
		ID:      strconv.FormatInt(created, 36) + "-" + strconv.FormatUint(uint64(rand.Uint32()), 36),
		Filter:  f,
		State:   CancelJobRunning,
		Created: time.UnixMilli(created),
		Shards:  len(l.spaces),
	}
	ls := q.newCancelLease(job.ID, DefaultCancelLease)
	ns := q.ns()
	cmds, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, ls.key, ls.token, ls.ttl)
		p.HSet(ctx, ns.CancelJob(job.ID), "id", job.ID, "prefix", f.IDPrefix, "owner", f.Owner,
			"labels", f.labelsArg(), "epoch_below", f.epochArg(), "created", created,
			"state", string(CancelJobRunning), "shards", job.Shards)
		p.ZAdd(ctx, ns.CancelJobs(), redis.Z{Score: float64(created), Member: job.ID})
		p.ZAdd(ctx, f.running(ns), redis.Z{Score: float64(created), Member: job.ID})
		return nil
	})
	if err != nil {
		return CancelJob{}, errorf("bulk cancel: record the job: %w", q.redisError(txCause(cmds, err)))
	}
	done, err := q.runCancelJob(ctx, l, &job, ls, cancelInCall, time.Now().Add(cancelInCallTime))
	if err == nil && done {
		err = q.finishCancelJob(ctx, l, &job)
	}
	if err != nil {
		q.failCancelJob(ctx, &job, err)
		if !errors.Is(err, errRunnerKilled) {
			ls.release(ctx)
		}
		return job, errorf("bulk cancel job %s: %w", job.ID, err)
	}
	ls.release(ctx)
	if !done {
		// Handed to the workers: read where it stands.
		if j, err := q.CancelJobs().Get(ctx, job.ID); err == nil {
			job = j
		}
	}
	return job, nil
}

func (q *Queue) ns() keyspace.Namespace { return keyspace.Namespace(q.opts.Namespace) }

// runCancelJob runs job's steps, shard by shard, until every shard is done
// (true), the steps selected more than limit timers or deadline passed
// (false; limit 0 and a zero deadline mean no bound), or the lease was
// lost (false). job.Counts gains the counts of the steps it ran.
func (q *Queue) runCancelJob(ctx context.Context, l *layout, job *CancelJob, ls *cancelLease, limit int64, deadline time.Time) (bool, error) {
	if job.Shards != len(l.spaces) {
		return false, fmt.Errorf("%w: the job was made for %d shards, the namespace has %d", ErrInvalidOptions, job.Shards, len(l.spaces))
	}
	_, doneShards, err := q.cancelProgress(ctx, job.ID, job.Shards)
	if err != nil {
		return false, q.redisError(err)
	}
	var seen CancelCounts
	for k := range l.spaces {
		if doneShards[k] {
			continue
		}
		for {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			if (limit > 0 && seen.Matched() >= limit) || (!deadline.IsZero() && time.Now().After(deadline)) {
				return false, nil
			}
			if !ls.keep(ctx) {
				return false, nil
			}
			reply, err := q.runKeysTries(ctx, l, lua.CancelBatch, k, job.ID, migrationAttempts,
				job.Filter.match(), cancelScanCount, q.opts.retentionMillis(), l.spaces[k].TimerChannelPrefix(),
				job.Filter.Owner, job.Filter.labelsArg(), job.Filter.epochArg(), job.Filter.IDPrefix)
			if err != nil {
				return false, err
			}
			r, err := replyStrings(reply)
			if err != nil || len(r) != 5 {
				return false, fmt.Errorf("unexpected reply %v", reply)
			}
			step := CancelCounts{Cancelled: atoi(r[1]), Fired: atoi(r[2]), AlreadyCancelled: atoi(r[3]), Skipped: atoi(r[4])}
			seen.add(step)
			job.Counts.add(step)
			if h := cancelStepHook.Load(); h != nil && !(*h)(job.ID, k) {
				return false, errRunnerKilled
			}
			if r[0] == "1" {
				break
			}
		}
	}
	return true, nil
}

// cancelProgress reads job id's progress on each of its shards: the sum of
// the counts and which shards are done.
func (q *Queue) cancelProgress(ctx context.Context, id string, shards int) (CancelCounts, []bool, error) {
	spaces := keyspace.Shards(q.opts.Namespace, shards)
	cmds := make([]*redis.SliceCmd, len(spaces))
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, sp := range spaces {
			cmds[k] = p.HMGet(ctx, sp.CancelProgress(id), "done", "cancelled", "fired", "already", "skipped")
		}
		return nil
	})
	if err != nil {
		return CancelCounts{}, nil, err
	}
	var c CancelCounts
	done := make([]bool, len(cmds))
	for k, cmd := range cmds {
		v := cmd.Val()
		s := func(i int) int64 {
			str, _ := v[i].(string)
			return atoi(str)
		}
		done[k] = s(0) == 1
		c.add(CancelCounts{Cancelled: s(1), Fired: s(2), AlreadyCancelled: s(3), Skipped: s(4)})
	}
	return c, done, nil
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// finishCancelJob records job as done with the totals of its shards'
// progress, and lets its keys expire after the retention.
func (q *Queue) finishCancelJob(ctx context.Context, l *layout, job *CancelJob) error {
	counts, doneShards, err := q.cancelProgress(ctx, job.ID, job.Shards)
	if err != nil {
		return q.redisError(err)
	}
	done := countTrue(doneShards)
	if done != job.Shards {
		return fmt.Errorf("the job's progress says %d of %d shards are done", done, job.Shards)
	}
	now, err := q.rdb.Time(ctx).Result()
	if err != nil {
		return q.redisError(err)
	}
	ns := q.ns()
	ret := q.opts.Retention
	// Not a transaction (a worker's ACL has no MULTI): a runner that dies
	// after the HSET leaves the job in the running set, and the next one
	// drops it there, finding it done.
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, ns.CancelJob(job.ID), "state", string(CancelJobDone), "finished", now.UnixMilli(),
			"cancelled", counts.Cancelled, "fired", counts.Fired, "already", counts.AlreadyCancelled, "skipped", counts.Skipped)
		if ret != KeepForever {
			p.PExpire(ctx, ns.CancelJob(job.ID), ret)
		}
		p.ZRem(ctx, job.Filter.running(ns), job.ID)
		return nil
	})
	if err != nil {
		return q.redisError(err)
	}
	if ret != KeepForever {
		// The progress hashes stay as long as the record, so that a
		// runner still stepping a shard finds it done, not a new scan.
		_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, sp := range l.spaces {
				p.PExpire(ctx, sp.CancelProgress(job.ID), ret)
			}
			return nil
		})
		if err != nil {
			return q.redisError(err)
		}
	}
	job.State, job.Finished, job.Counts, job.ShardsDone = CancelJobDone, time.UnixMilli(now.UnixMilli()), counts, done
	return nil
}

// failCancelJob marks job failed with cause, unless retrying can help
// (Transient, or the context ended): then it stays running for the
// workers. Best effort: if the mark does not reach Redis, a worker runs
// the job again and marks it then.
func (q *Queue) failCancelJob(ctx context.Context, job *CancelJob, cause error) {
	if Transient(cause) || ctx.Err() != nil || errors.Is(cause, errRunnerKilled) {
		return
	}
	ns := q.ns()
	msg := cause.Error()
	now := time.Now()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, err := q.rdb.Pipelined(wctx, func(p redis.Pipeliner) error {
		p.HSet(wctx, ns.CancelJob(job.ID), "state", string(CancelJobFailed), "finished", now.UnixMilli(), "error", msg)
		if q.opts.Retention != KeepForever {
			p.PExpire(wctx, ns.CancelJob(job.ID), q.opts.Retention)
		}
		p.ZRem(wctx, job.Filter.running(ns), job.ID)
		return nil
	})
	if err == nil && q.opts.Retention != KeepForever {
		_, err = q.rdb.Pipelined(wctx, func(p redis.Pipeliner) error {
			for _, sp := range keyspace.Shards(q.opts.Namespace, job.Shards) {
				p.PExpire(wctx, sp.CancelProgress(job.ID), q.opts.Retention)
			}
			return nil
		})
	}
	if err == nil {
		job.State, job.Finished, job.Error = CancelJobFailed, time.UnixMilli(now.UnixMilli()), msg
	}
}

// CancelJobs is the API of a namespace's bulk cancel jobs (CancelMatching).
type CancelJobs struct{ q *Queue }

// CancelJobs returns the API of the namespace's bulk cancel jobs.
func (q *Queue) CancelJobs() CancelJobs { return CancelJobs{q} }

// validJobID reports whether id has the form of a job ID (base 36 digits
// and a '-'), so that no other string becomes part of a key name.
func validJobID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-') {
			return false
		}
	}
	return true
}

// Get reads bulk cancel job id, with its progress while it runs. It gives
// ErrCancelJobNotFound for a job that does not exist or whose retention
// passed.
func (c CancelJobs) Get(ctx context.Context, id string) (CancelJob, error) {
	q := c.q
	if !validJobID(id) {
		return CancelJob{}, fmt.Errorf("%w: %q is not a job ID", ErrCancelJobNotFound, id)
	}
	m, err := q.rdb.HGetAll(ctx, q.ns().CancelJob(id)).Result()
	if err != nil {
		return CancelJob{}, errorf("bulk cancel job %s: %w", id, q.redisError(err))
	}
	if len(m) == 0 {
		return CancelJob{}, fmt.Errorf("%w: %s (a job is kept for the retention after it ends)", ErrCancelJobNotFound, id)
	}
	job := decodeCancelJob(m)
	if job.State == CancelJobRunning || job.State == CancelJobFailed {
		counts, done, err := q.cancelProgress(ctx, id, job.Shards)
		if err != nil {
			return CancelJob{}, errorf("bulk cancel job %s: %w", id, q.redisError(err))
		}
		job.Counts, job.ShardsDone = counts, countTrue(done)
	}
	return job, nil
}

func decodeCancelJob(m map[string]string) CancelJob {
	ms := func(f string) time.Time {
		if v := atoi(m[f]); v > 0 {
			return time.UnixMilli(v)
		}
		return time.Time{}
	}
	job := CancelJob{
		ID:       m["id"],
		Filter:   decodeCancelFilter(m),
		State:    CancelJobState(m["state"]),
		Created:  ms("created"),
		Finished: ms("finished"),
		Error:    m["error"],
		Shards:   int(atoi(m["shards"])),
		Counts: CancelCounts{Cancelled: atoi(m["cancelled"]), Fired: atoi(m["fired"]),
			AlreadyCancelled: atoi(m["already"]), Skipped: atoi(m["skipped"])},
	}
	if job.State == CancelJobDone {
		job.ShardsDone = job.Shards
	}
	return job
}

// List returns the namespace's bulk cancel jobs still kept, newest first,
// at most 100.
func (c CancelJobs) List(ctx context.Context) ([]CancelJob, error) {
	q := c.q
	// ZRANGE … REV rather than ZREVRANGE, which the ACL lines do not grant.
	ids, err := q.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: q.ns().CancelJobs(), Start: 0, Stop: cancelListMax - 1, Rev: true}).Result()
	if err != nil {
		return nil, errorf("bulk cancel jobs: %w", q.redisError(err))
	}
	jobs := make([]CancelJob, 0, len(ids))
	for _, id := range ids {
		j, err := c.Get(ctx, id)
		if errors.Is(err, ErrCancelJobNotFound) {
			continue // past its retention; RunCancelJobs drops it from the list
		}
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// RunCancelJobs runs the namespace's unfinished bulk cancel jobs that no
// other runner holds, each under a lease of lease (0: DefaultCancelLease)
// renewed as it goes, until each is done or ctx ends, and drops jobs past
// their retention from the list. It returns how many jobs it finished. A
// job a runner left unfinished (it died, or lost its lease) is resumed
// where its last step left it; two runners on one job never repeat a step.
// Package poller calls it about once a second.
func (e Engine) RunCancelJobs(ctx context.Context, lease time.Duration) (int, error) {
	q := e.q
	if lease <= 0 {
		lease = DefaultCancelLease
	}
	ns := q.ns()
	if err := q.pruneCancelJobs(ctx); err != nil {
		return 0, err
	}
	type running struct{ set, id string }
	var jobs []running
	for _, set := range []string{ns.CancelRunning(), ns.CancelRunningFiltered()} {
		ids, err := q.rdb.ZRange(ctx, set, 0, -1).Result()
		if err != nil {
			return 0, errorf("bulk cancel jobs: %w", q.redisError(err))
		}
		for _, id := range ids {
			jobs = append(jobs, running{set, id})
		}
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	l, err := q.layout(ctx)
	if err != nil {
		return 0, err
	}
	finished := 0
	for _, r := range jobs {
		id := r.id
		ls := q.newCancelLease(id, lease)
		ok, err := q.rdb.SetNX(ctx, ls.key, ls.token, ls.ttl).Result()
		if err != nil {
			return finished, errorf("bulk cancel job %s: take the lease: %w", id, q.redisError(err))
		}
		if !ok {
			continue // another runner has it
		}
		done, err := q.resumeCancelJob(ctx, l, r.set, id, ls)
		if errors.Is(err, errRunnerKilled) {
			return finished, err // as a dead worker: no release
		}
		ls.release(ctx)
		if err != nil {
			return finished, err
		}
		if done {
			finished++
		}
	}
	return finished, nil
}

// resumeCancelJob runs job id, found in the running set set, to its end
// under ls, and reports whether it ended.
func (q *Queue) resumeCancelJob(ctx context.Context, l *layout, set, id string, ls *cancelLease) (bool, error) {
	ns := q.ns()
	m, err := q.rdb.HGetAll(ctx, ns.CancelJob(id)).Result()
	if err != nil {
		return false, errorf("bulk cancel job %s: %w", id, q.redisError(err))
	}
	job := decodeCancelJob(m)
	if len(m) == 0 || job.State != CancelJobRunning {
		// Ended (or gone): it has no business in the running set.
		if err := q.rdb.ZRem(ctx, set, id).Err(); err != nil {
			return false, errorf("bulk cancel job %s: %w", id, q.redisError(err))
		}
		return false, nil
	}
	done, err := q.runCancelJob(ctx, l, &job, ls, 0, time.Time{})
	if err == nil && done {
		err = q.finishCancelJob(ctx, l, &job)
	}
	if err != nil {
		q.failCancelJob(ctx, &job, err)
		return false, errorf("bulk cancel job %s: %w", id, err)
	}
	return done, nil
}

// pruneCancelJobs drops from the list of jobs those whose record expired.
func (q *Queue) pruneCancelJobs(ctx context.Context) error {
	if q.opts.Retention == KeepForever {
		return nil
	}
	ns := q.ns()
	cutoff := time.Now().Add(-q.opts.Retention).UnixMilli()
	ids, err := q.rdb.ZRangeByScore(ctx, ns.CancelJobs(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(cutoff, 10), Count: 100}).Result()
	if err != nil {
		return errorf("bulk cancel jobs: %w", q.redisError(err))
	}
	for _, id := range ids {
		_, err := q.rdb.HGet(ctx, ns.CancelJob(id), "id").Result()
		if err == redis.Nil {
			err = q.rdb.ZRem(ctx, ns.CancelJobs(), id).Err()
		}
		if err != nil {
			return errorf("bulk cancel jobs: %w", q.redisError(err))
		}
	}
	return nil
}

// cancelLease is a runner's hold on a job: a key holding its token,
// expiring after ttl unless renewed. It keeps two runners from working on
// one job at once most of the time, which saves work, not correctness:
// the steps of a job are atomic and each starts where the last one ended,
// whoever runs them. So renewing and releasing check the token with a GET
// before the PEXPIRE or DEL, not in one atomic step (a worker's ACL needs
// no WATCH, MULTI or script for it).
type cancelLease struct {
	q       *Queue
	key     string
	token   string
	ttl     time.Duration
	renewed time.Time
	lost    bool
}

func (q *Queue) newCancelLease(job string, ttl time.Duration) *cancelLease {
	return &cancelLease{q: q, key: q.ns().CancelLease(job), token: strconv.FormatUint(rand.Uint64(), 36), ttl: ttl, renewed: time.Now()}
}

// held reports whether the lease key still holds this runner's token.
func (ls *cancelLease) held(ctx context.Context) bool {
	v, err := ls.q.rdb.Get(ctx, ls.key).Result()
	return err == nil && v == ls.token
}

// keep renews the lease when a third of it has passed, and reports
// whether it is still held. A lease that could not be renewed is lost:
// the runner stops, and the job is resumed by whoever takes it next.
func (ls *cancelLease) keep(ctx context.Context) bool {
	if ls.lost {
		return false
	}
	if time.Since(ls.renewed) < ls.ttl/3 {
		return true
	}
	start := time.Now()
	if !ls.held(ctx) || ls.q.rdb.PExpire(ctx, ls.key, ls.ttl).Err() != nil {
		ls.lost = true
		return false
	}
	ls.renewed = start
	return true
}

// release deletes the lease if this runner still holds it. Best effort:
// an unreleased lease expires by itself.
func (ls *cancelLease) release(ctx context.Context) {
	if ls.lost {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if ls.held(rctx) {
		ls.q.rdb.Del(rctx, ls.key)
	}
}

// txCause returns the error that made a MULTI/EXEC transaction fail: the
// refusal of the command Redis would not queue (a NOPERM naming the
// right, an OOM), which Redis answers at EXEC only with EXECABORT, and err
// itself when no command carries another.
func txCause(cmds []redis.Cmder, err error) error {
	for _, c := range cmds {
		if e := c.Err(); e != nil && !redis.HasErrorPrefix(e, "EXECABORT") {
			return e
		}
	}
	return err
}

// decodeCancelFilter reads a job record's filter back.
func decodeCancelFilter(m map[string]string) CancelFilter {
	f := CancelFilter{IDPrefix: m["prefix"], Owner: m["owner"]}
	f.EpochBelow, _ = strconv.ParseUint(m["epoch_below"], 10, 64)
	for _, kv := range strings.Split(m["labels"], metaSep)[1:] {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if f.Labels == nil {
				f.Labels = map[string]string{}
			}
			f.Labels[k] = v
		}
	}
	return f
}
