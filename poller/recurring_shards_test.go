package poller_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// oneSchedulePerShard returns schedule IDs, the k-th of which lives in
// shard k of a namespace of shards shards.
func oneSchedulePerShard(prefix string, shards int) []string {
	ids := make([]string, shards)
	for i, left := 0, shards; left > 0; i++ {
		id := fmt.Sprint(prefix, i)
		if k := keyspace.ScheduleShard(id, shards); ids[k] == "" {
			ids[k] = id
			left--
		}
	}
	return ids
}

// occurrenceLog records fired occurrences from a Claimed hook.
type occurrenceLog struct {
	mu    sync.Mutex
	count map[string]int // occurrence ID -> fires
	shard map[string]int // occurrence ID -> the shard it fired from
	early []queue.Fired
}

func newOccurrenceLog() *occurrenceLog {
	return &occurrenceLog{count: map[string]int{}, shard: map[string]int{}}
}

func (o *occurrenceLog) claimed(res queue.ClaimResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range res.Fired {
		o.count[f.ID]++
		o.shard[f.ID] = res.Shard
		if f.FiredAt.Before(f.Due) {
			o.early = append(o.early, f)
		}
	}
}

// series returns how many occurrences of the interval schedule fired in an
// unbroken series from the first, checking each fired once, from shard k.
func (o *occurrenceLog) series(t *testing.T, info queue.RecurringInfo, k int) int {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for j := 1; ; j++ {
		id := queue.OccurrenceID(info.ID, info.Anchor.Add(time.Duration(j)*info.Every))
		switch c := o.count[id]; {
		case c == 0:
			return n
		case c > 1:
			t.Fatalf("%s fired %d times", id, c)
		case o.shard[id] != k:
			t.Fatalf("%s fired from shard %d; its schedule lives in shard %d", id, o.shard[id], k)
		}
		n++
	}
}

// Two pollers share a 4-shard namespace with a schedule on each shard:
// every occurrence fires once, from its schedule's shard, none early, in
// unbroken series, and the next ones stay armed.
func TestPollersFireRecurringOnShardedNamespace(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newShardedQueue(t, b.Client, 4)
		log := newOccurrenceLog()
		var pollers []*poller.Poller
		var stops []func()
		for _, id := range []string{"one", "two"} {
			logs := &logBuf{}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("poller %s logged:\n%s", id, logs.String())
				}
			})
			p, err := poller.New(q, poller.Options{
				WorkerID: id, Heartbeat: 50 * time.Millisecond, MemberTTL: 300 * time.Millisecond,
				MaxPollInterval: 50 * time.Millisecond, Maintenance: poller.MaintenanceOptions{Disabled: true},
				// A claim or arm that outlives ClaimTimeout has fired
				// without the poller seeing it, which leaves arming to the
				// repair pass after its 2 s grace: longer than a 100 ms
				// schedule's catch-up limit of 10. Under -race on a loaded
				// machine miniredis's Lua took longer than the 2 s default.
				ClaimTimeout: 30 * time.Second,
				Hooks:        poller.Hooks{Claimed: log.claimed}, Logger: logs.logger(),
			})
			if err != nil {
				t.Fatal(err)
			}
			pollers = append(pollers, p)
			stops = append(stops, start(t, p))
		}
		waitFor(t, 5*time.Second, "both pollers to own shards", func() bool {
			return len(pollers[0].OwnedShards()) > 0 && len(pollers[1].OwnedShards()) > 0 &&
				len(pollers[0].OwnedShards())+len(pollers[1].OwnedShards()) == 4
		})
		ids := oneSchedulePerShard("beat", 4)
		infos := make([]queue.RecurringInfo, len(ids))
		for k, id := range ids {
			var err error
			// CatchUpAll with a high limit: the series must stay unbroken
			// even if a loaded machine delays arming past several
			// occurrences, which the default (CatchUpOnce, or a limit of
			// 10 = 1 s here) would rightly leave out.
			if infos[k], _, err = q.Recurring().Put(ctx, queue.Recurring{ID: id, Every: 100 * time.Millisecond, CatchUp: queue.CatchUpAll, CatchUpLimit: 1000}); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 15*time.Second, "6 occurrences of every schedule", func() bool {
			for k := range ids {
				if log.series(t, infos[k], k) < 6 {
					return false
				}
			}
			return true
		})
		for _, stop := range stops {
			stop()
		}
		total := 0
		for k, id := range ids {
			total += log.series(t, infos[k], k)
			info, err := q.Recurring().Get(ctx, id)
			if err != nil || len(info.Pending) == 0 {
				t.Fatalf("%s after the pollers stopped: pending %v, %v; want the next armed", id, info.Pending, err)
			}
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		if len(log.early) > 0 {
			t.Fatalf("fired early: %+v", log.early)
		}
		if total != len(log.count) {
			t.Fatalf("%d occurrences in series, %d fired in all: a gap or a stray (%v)", total, len(log.count), log.count)
		}
	})
}

// A worker fired each schedule's only armed occurrence (Ahead 1) and died
// before arming the next. Two pollers, each owning half the shards, repair
// the schedules of their own shards, and the schedules fire on.
func TestPollersRepairShardedSchedulesAfterACrash(t *testing.T) {
	t.Parallel() // its own namespace on each backend; see docs/development.md, "Loops"
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newShardedQueue(t, b.Client, 4)
		ids := oneSchedulePerShard("crash", 4)
		infos := make([]queue.RecurringInfo, len(ids))
		for k, id := range ids {
			var err error
			if infos[k], _, err = q.Recurring().Put(ctx, queue.Recurring{ID: id, Every: 300 * time.Millisecond, Ahead: 1}); err != nil {
				t.Fatal(err)
			}
		}
		fired := 0
		waitFor(t, 5*time.Second, "the dead worker to fire every first occurrence", func() bool {
			res, err := q.Engine().Claim(ctx, queue.MaxBatch)
			if err != nil {
				t.Fatal(err)
			}
			fired += len(res.Fired)
			return fired >= len(ids)
		})
		for _, id := range ids {
			if info, err := q.Recurring().Get(ctx, id); err != nil || len(info.Pending) != 0 {
				t.Fatalf("%s after the crash: pending %v, %v; want nothing armed", id, info.Pending, err)
			}
		}
		log := newOccurrenceLog()
		logs := []*logBuf{{}, {}}
		for i, shards := range [][]int{{0, 1}, {2, 3}} {
			p, err := poller.New(q, poller.Options{
				WorkerID: fmt.Sprint("p", i), FixedShards: shards, MaxPollInterval: 50 * time.Millisecond,
				Maintenance: poller.MaintenanceOptions{Disabled: true},
				Hooks:       poller.Hooks{Claimed: log.claimed}, Logger: logs[i].logger(),
			})
			if err != nil {
				t.Fatal(err)
			}
			start(t, p)
		}
		// The repair waits DefaultRepairGrace past the fired occurrence.
		waitFor(t, 15*time.Second, "every schedule to fire again after its repair", func() bool {
			log.mu.Lock()
			defer log.mu.Unlock()
			for _, id := range ids {
				n := 0
				for occ := range log.count {
					if sid, _, _ := queue.ParseOccurrenceID(occ); sid == id {
						n++
					}
				}
				if n < 2 {
					return false
				}
			}
			return true
		})
		for i, shards := range [][]int{{0, 1}, {2, 3}} {
			for _, k := range shards {
				if logs[i].count(fmt.Sprintf(" shard=%d armed=", k)) == 0 {
					t.Errorf("poller %d did not repair its shard %d", i, k)
				}
			}
			for _, k := range []int{0, 1, 2, 3} {
				if !slices.Contains(shards, k) && logs[i].count(fmt.Sprintf(" shard=%d armed=", k)) > 0 {
					t.Errorf("poller %d repaired shard %d, which it does not own", i, k)
				}
			}
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		for occ, c := range log.count {
			if c != 1 {
				t.Fatalf("%s fired %d times", occ, c)
			}
		}
		if len(log.early) > 0 {
			t.Fatalf("fired early: %+v", log.early)
		}
	})
}
