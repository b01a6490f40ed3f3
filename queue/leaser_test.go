package queue_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	lua "github.com/timerq/timerq/scripts/lua"
)

// opRecorder records, in order, the lease rounds ("lease": a command or
// pipeline that runs lease.lua) and the waits ("wake": an XREADGROUP sent
// by the client, which is the wake group's) that a Queue sends.
type opRecorder struct {
	mu  sync.Mutex
	ops []string
}

func (r *opRecorder) record(cmds ...redis.Cmder) {
	sha := fmt.Sprintf("%x", sha1.Sum([]byte(lua.Lease.Source)))
	for _, cmd := range cmds {
		op := ""
		if cmd.Name() == "xreadgroup" {
			op = "wake"
		} else if args := cmd.Args(); len(args) > 1 {
			if s := fmt.Sprint(args[1]); s == lua.Lease.Function || s == sha {
				op = "lease"
			}
		}
		if op != "" {
			r.mu.Lock()
			r.ops = append(r.ops, op)
			r.mu.Unlock()
			return // a pipeline is one round
		}
	}
}

// take returns the operations recorded since the last take.
func (r *opRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops = nil
	return ops
}

// TestLeaserWaitsAfterADrainingCall: a Leaser call that handed out fewer
// fires than it asked for, leaving the streams drained, makes the next
// call wait for a new fire first instead of running a lease round that
// would find nothing. After a call that filled its Count (more may be
// there), or longer than leaserFresh after the last call, the next call
// runs its round first, as Queue.Lease always does.
func TestLeaserWaitsAfterADrainingCall(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Config{})
	b := &redistest.Backend{Name: "real", Client: srv.Client(t), Real: srv}
	q := newQueue(t, b, queue.Options{})
	rec := &opRecorder{}
	qc := hookedQueue(t, srv.Addr(), q.Namespace(), cmdHook(rec.record))
	lr := &queue.Leaser{Queue: qc, Group: "g", Consumer: "c"}
	queue.SetLeaserFresh(lr, time.Hour) // however slow the machine is between two calls
	leaseN := func(count int, block time.Duration, want int) {
		t.Helper()
		ds, err := lr.Lease(context.Background(), queue.LeaseOptions{Count: count, Block: block})
		if err != nil || len(ds) != want {
			t.Fatalf("Lease(Count %d) = %v, %v; want %d fires", count, timerIDs(ds), err, want)
		}
	}
	leaseN(10, 50*time.Millisecond, 0) // creates the group and its wake group
	fireN(t, q, "a", 3)
	leaseN(10, 5*time.Second, 3)
	rec.take()
	leaseN(10, 200*time.Millisecond, 0)
	if ops := rec.take(); len(ops) == 0 || ops[0] != "wake" || strings.Count(strings.Join(ops, " "), "lease") != 1 {
		t.Errorf("the call after one that drained the stream sent %v, want a wait first and one lease round (after it)", ops)
	}

	fireN(t, q, "b", 3)
	leaseN(2, 5*time.Second, 2)
	rec.take()
	leaseN(2, 5*time.Second, 1)
	if ops := rec.take(); len(ops) == 0 || ops[0] != "lease" {
		t.Errorf("the call after one that filled its Count sent %v, want a lease round first", ops)
	}

	queue.SetLeaserFresh(lr, time.Nanosecond)
	rec.take()
	leaseN(10, 200*time.Millisecond, 0)
	if ops := rec.take(); len(ops) == 0 || ops[0] != "lease" {
		t.Errorf("a call past leaserFresh sent %v, want a lease round first", ops)
	}
}

// TestLeaserRoundFirstOnAShardedCluster: on a Cluster with several shards
// a wait for new fires is a pause that no fire ends (awaitFires), so a
// Leaser keeps nothing from a call that drained the streams and its next
// call runs its round first; elsewhere the next call waits first.
func TestLeaserRoundFirstOnAShardedCluster(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		q := newQueue(t, b, queue.Options{})
		fireN(t, q, "d", 3)
		lr := &queue.Leaser{Queue: q, Group: "g", Consumer: "c"}
		ds, err := lr.Lease(context.Background(), queue.LeaseOptions{Count: 100})
		if err != nil || len(ds) != 3 {
			t.Fatalf("Lease = %v, %v; want 3 fires", timerIDs(ds), err)
		}
		sharded := b.Cluster != nil && b.Shards > 1
		if got := queue.LeaserWaitsFirst(lr); got == sharded {
			t.Errorf("after a call that drained the streams, LeaserWaitsFirst = %v on %s, want %v", got, b.Name, !sharded)
		}
	})
}
