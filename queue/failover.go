package queue

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterStateReloadInterval is how often timerq's own Cluster clients
// (timerworker, timerctl and its dashboard, timerbench) re-read the slot
// map with no error to prompt them (redis.ClusterOptions field of the
// same name; go-redis's default is 60 s). go-redis reloads lazily, on the
// first command after the interval has passed, so an idle client sends
// nothing; a busy one sends one CLUSTER SLOTS per interval. Give your own
// ClusterClient the same, beside ReloadOnFailover:
//
//	rdb := redis.NewClusterClient(&redis.ClusterOptions{
//		Addrs:                      addrs,
//		ClusterStateReloadInterval: queue.ClusterStateReloadInterval,
//	})
//	queue.ReloadOnFailover(rdb)
const ClusterStateReloadInterval = 5 * time.Second

// minReloadGap spaces the reloads ReloadOnFailover asks for: during an
// outage every command fails, and one CLUSTER SLOTS per gap is enough to
// see the promotion within that gap.
const minReloadGap = 100 * time.Millisecond

// ReloadOnFailover makes a Redis Cluster client re-read its slot map as
// soon as a command fails the way a master failover makes commands fail:
// a connection error (the dead master refuses connections, or a frozen
// one times out) or a CLUSTERDOWN reply. It does nothing to other clients
// (standalone, or Sentinel, whose client follows failovers itself).
//
// Why: go-redis re-reads the slot map only on a MOVED or ASK reply, or
// every ClusterStateReloadInterval (60 s by default). A failed master
// sends neither, so without this the client keeps dialling the dead
// address and the shards it served stall for up to a minute after Redis
// has promoted the replica. With it they resume within about a second of
// the promotion (docs/operations.md, "Cluster failover").
//
// The reloads are asynchronous (ClusterClient.ReloadState), at most one
// per 100 ms. Call it once per client, before use; timerworker, timerctl
// and timerbench call it on the clients they build.
func ReloadOnFailover(rdb redis.UniversalClient) {
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	h := &failoverHook{c: c}
	c.AddHook(h)
	// On each node's client too: a Cluster client retries a failed call
	// on a fresh look-up of the slot's node (MaxRedirects), so a reload
	// asked for after the first attempt can already route the retry to the
	// promoted replica, and the call succeeds. Nodes the client has
	// already connected to keep only the hook above.
	c.OnNewNode(func(n *redis.Client) { n.AddHook(h) })
}

// failoverHook asks c for a slot-map reload after a command that failed
// as a failover makes commands fail.
type failoverHook struct {
	c    *redis.ClusterClient
	last atomic.Int64 // UnixNano of the last reload asked for
}

func (h *failoverHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failoverHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if failoverSign(err) {
			h.reload()
		}
		return err
	}
}

func (h *failoverHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if failoverSign(err) {
			h.reload()
			return err
		}
		for _, cmd := range cmds {
			if failoverSign(cmd.Err()) {
				h.reload()
				break
			}
		}
		return err
	}
}

func (h *failoverHook) reload() {
	now := time.Now().UnixNano()
	last := h.last.Load()
	if now-last < int64(minReloadGap) || !h.last.CompareAndSwap(last, now) {
		return
	}
	// The reload runs on go-redis's own goroutine, which outlives no
	// client: it ends after one CLUSTER SLOTS.
	h.c.ReloadState(context.Background())
}

// failoverSign reports whether err is what a failing or failed master
// causes: CLUSTERDOWN, or a connection error (dial refused, EOF, reset,
// network timeout). Replies Redis gave otherwise, redis.Nil, a closed
// client and the caller's own context ending are not.
func failoverSign(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return hasRedisCode(err, "CLUSTERDOWN")
	}
	return true
}

// isDialError reports whether err is a failure to connect: the command
// was not sent on that attempt.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// mayHaveRun reports whether a script call that failed with err may have
// run in Redis: every error that is not a reply from Redis. That includes a
// dial error, since go-redis retries a call whose connection broke after
// the command was written (MaxRetries, MaxRedirects), and reports only the
// last attempt's error: a lost reply then a refused reconnection ends in
// "connection refused", though the first attempt may have run.
//
// A script's own refusal is a reply too, though redisError gives it its
// sentinel and words in place of the reply (TIMERQ_NOENDPOINT,
// TIMERQ_RELAYOUT, TIMERQ_OCCURRENCE, TIMERQ_EPOCH, TIMERQ_FIREBY): the script refused before its
// first write, so a caller told "outcome unknown: retry" beside "nothing
// was scheduled" would get two contradicting causes.
func mayHaveRun(err error) bool {
	if err == nil || errors.Is(err, redis.ErrClosed) || errors.Is(err, ErrClosed) {
		return false
	}
	// A script's refusal that the queue turned into its own error.
	if errors.Is(err, ErrEndpointNotFound) || errors.Is(err, ErrShardMismatch) || errors.Is(err, ErrOccurrenceID) || errors.Is(err, ErrQuotaExceeded) ||
		errors.Is(err, ErrStaleEpoch) || errors.Is(err, ErrInvalidOptions) {
		return false
	}
	var rerr redis.Error
	return !errors.As(err, &rerr)
}
