package poller_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/consistency"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/scripts/lua"
)

// dropClaimReplies loses the reply of every other claim after Redis ran it,
// as a client timeout during a slow claim does.
type dropClaimReplies struct {
	shas    []string // the claim script in both pub/sub flavours
	claims  atomic.Int64
	dropped atomic.Int64
}

func (d *dropClaimReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d *dropClaimReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (d *dropClaimReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err == nil && (cmd.Name() == "evalsha" || cmd.Name() == "fcall") && len(args) > 1 && slices.Contains(d.shas, fmt.Sprint(args[1])) && d.claims.Add(1)%2 == 0 {
			d.dropped.Add(1)
			err = errors.New("test: claim reply lost (i/o timeout)")
			cmd.SetErr(err)
		}
		return err
	}
}

// TestNamespaceCountersCountLostReplies: claims whose reply is lost fire
// their timers uncounted by the process, but counted by Redis, and the
// namespace collector exports Redis's count.
func TestNamespaceCountersCountLostReplies(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		classic, sharded := sha1.Sum([]byte(lua.Claim.Source)), sha1.Sum([]byte(lua.Claim.ShardedSource))
		drop := &dropClaimReplies{shas: []string{hex.EncodeToString(classic[:]), hex.EncodeToString(sharded[:]), lua.Claim.Function, lua.Claim.ShardedFunction}}
		var rdb *redis.Client
		if b.Mini != nil {
			rdb = redis.NewClient(&redis.Options{Addr: b.Mini.Addr()})
		} else {
			rdb = redis.NewClient(&redis.Options{Addr: b.Real.Addr()})
		}
		defer rdb.Close()
		rdb.AddHook(drop)
		q := newQueue(t, rdb, redistest.Namespace(t))
		const n = 60
		for i := range n {
			if _, err := q.Schedule(ctx, fmt.Sprint("t", i), time.Now().Add(-time.Second), nil); err != nil {
				t.Fatal(err)
			}
		}
		metrics := poller.NewMetrics()
		p, err := poller.New(q, poller.Options{
			BatchSize:   7,
			BackoffMin:  time.Millisecond,
			BackoffMax:  5 * time.Millisecond,
			Logger:      (&logBuf{}).logger(),
			Maintenance: poller.MaintenanceOptions{Disabled: true},
			Hooks:       metrics.Hooks(),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, p)
		waitFor(t, 10*time.Second, "every timer fired", func() bool {
			s, err := q.Stats(ctx)
			return err == nil && s.Scheduled == 0
		})
		stop()

		if drop.dropped.Load() == 0 {
			t.Fatal("no claim reply was dropped: the test proves nothing")
		}
		reg := prometheus.NewRegistry()
		if err := metrics.Register(reg); err != nil {
			t.Fatal(err)
		}
		reg.MustRegister(poller.NewCountersCollector(q))
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var local, fired, count float64
		for _, f := range fams {
			switch f.GetName() {
			case "timerq_timers_fired_total":
				local = f.GetMetric()[0].GetCounter().GetValue()
			case "timerq_namespace_timers_fired_total":
				fired = f.GetMetric()[0].GetCounter().GetValue()
			case "timerq_namespace_fire_lateness_seconds":
				count = float64(f.GetMetric()[0].GetHistogram().GetSampleCount())
			}
		}
		if local >= n {
			t.Errorf("the process counted %v fires with %d replies lost, want fewer than %d", local, drop.dropped.Load(), n)
		}
		if fired != n || count != n {
			t.Errorf("namespace metrics: %v fired, lateness count %v; want %d and %d", fired, count, n, n)
		}
		if got := fireEntries(t, rdb, q); len(got) != n {
			t.Errorf("%d timers in the fire stream, want %d", len(got), n)
		}
		bad, err := consistency.Check(ctx, rdb, q, false)
		if err != nil || len(bad) > 0 {
			t.Fatalf("inconsistent: %v %v", bad, err)
		}
	})
}

// TestPollerStopsOnPermissionError: a claim or purge Redis refuses for lack
// of a right stops Run with that error within a few seconds, and leaves
// the timers untouched; an outage is retried (TestPollerBacksOffAndRecovers).
func TestPollerStopsOnPermissionError(t *testing.T) {
	for _, tc := range []struct {
		minus, want string
		purge       bool
	}{
		{"-publish", "may not run PUBLISH", false},
		{"-hdel", "may not run HDEL", true},
	} {
		t.Run(tc.minus, func(t *testing.T) {
			srv := redistest.Start(t, redistest.Config{})
			admin := srv.Client(t)
			ctx := context.Background()
			ns := redistest.Namespace(t)
			prefix := "timerq:{" + ns + "}:"
			if err := admin.Do(ctx, "ACL", "SETUSER", "w", "on", ">pw", "~"+prefix+"*", "&"+prefix+"*", "+@all", tc.minus).Err(); err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "w", Password: "pw"})
			defer rdb.Close()
			q, err := queue.New(rdb, queue.Options{Namespace: ns, Retention: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			aq, err := queue.New(admin, queue.Options{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			defer aq.Close()
			if _, err := aq.Schedule(ctx, "x", time.Now().Add(-time.Second), nil); err != nil {
				t.Fatal(err)
			}
			var logs logBuf
			p, err := poller.New(q, poller.Options{
				BackoffMin:  time.Millisecond,
				Logger:      logs.logger(),
				Maintenance: poller.MaintenanceOptions{PurgeInterval: 20 * time.Millisecond},
			})
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Run still runs 5 s after a permission error")
			}
			if !errors.Is(err, queue.ErrPermission) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v after %v, want ErrPermission naming %q", err, time.Since(began), tc.want)
			}
			tm, err := aq.Get(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]queue.State{false: queue.StateScheduled, true: queue.StateFired}[tc.purge]; tm.State != want {
				t.Errorf("timer is %s, want %s", tm.State, want)
			}
			bad, err := consistency.Check(ctx, admin, aq, false)
			if err != nil || len(bad) > 0 {
				t.Fatalf("inconsistent: %v %v", bad, err)
			}
			if logs.count("claim failed; retrying") != 0 {
				t.Error("the poller retried a permission error")
			}
		})
	}
}
