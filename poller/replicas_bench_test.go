package poller_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// usedCPU is used_cpu_sys + used_cpu_user from INFO cpu, in seconds.
func usedCPU(tb testing.TB, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}

// BenchmarkReplicasCost measures what the replicas setting costs at a
// steady rate, on a master with one replica in sync (both on this host):
// the lateness a client sees (from the due time to the claim's reply in
// the worker, which is after the commit with the setting) and the
// master's and replica's CPU (INFO cpu) per timer, scheduling included.
// It reports metrics; it asserts nothing about speed. BENCHMARKS.md has
// the figures and the command:
//
//	go test -run '^$' -bench BenchmarkReplicasCost -benchtime 1x ./poller/
func BenchmarkReplicasCost(b *testing.B) {
	const (
		rate     = 1000 // timers due per second
		duration = 10 * time.Second
		lead     = time.Second
	)
	for _, replicas := range []int{0, 1} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			for range b.N {
				master := redistest.Start(b, redistest.Config{})
				_, port, _ := net.SplitHostPort(master.Addr())
				replica := redistest.Start(b, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
				mc, rc := master.Client(b), replica.Client(b)
				ctx := context.Background()
				redistest.Eventually(b, 30*time.Second, "the replica to sync", func() bool { return replInfo(rc, "master_link_status") == "up" })
				ns := "bench"
				if replicas > 0 {
					if err := queue.SetReplicas(ctx, mc, ns, replicas, &queue.ReplicasOptions{Force: true}); err != nil {
						b.Fatal(err)
					}
				}
				q, err := queue.New(mc, queue.Options{Namespace: ns})
				if err != nil {
					b.Fatal(err)
				}
				var mu sync.Mutex
				var late []time.Duration
				var failed []string
				p, err := poller.New(q, poller.Options{Hooks: poller.Hooks{ClaimFailed: func(err error) {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
				}, Claimed: func(res queue.ClaimResult) {
					now := time.Now()
					mu.Lock()
					for _, f := range res.Fired {
						late = append(late, now.Sub(f.Due))
					}
					mu.Unlock()
				}}})
				if err != nil {
					b.Fatal(err)
				}
				wctx, stop := context.WithCancel(ctx)
				var wg sync.WaitGroup
				wg.Go(func() { _ = p.Run(wctx) })
				cpuM, cpuR := usedCPU(b, mc), usedCPU(b, rc)
				start := time.Now().Add(lead)
				total := int(rate * duration / time.Second)
				b.ResetTimer()
				// Every 10 ms, schedule the timers due in the 10 ms lead later.
				tick := time.NewTicker(10 * time.Millisecond)
				for i := 0; i < total; {
					<-tick.C
					var batch []queue.NewTimer
					for ; i < total && len(batch) < rate/100; i++ {
						due := start.Add(time.Duration(i) * time.Second / rate)
						batch = append(batch, queue.NewTimer{ID: "t" + strconv.Itoa(i), Due: due})
					}
					if _, err := q.ScheduleBatch(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				tick.Stop()
				redistest.Eventually(b, 30*time.Second, "every timer to fire", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(late) >= total
				})
				b.StopTimer()
				dM, dR := usedCPU(b, mc)-cpuM, usedCPU(b, rc)-cpuR
				stop()
				wg.Wait()
				q.Close()
				slices.Sort(late)
				pct := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))].Microseconds()) / 1000 }
				b.ReportMetric(pct(0.5), "late-p50-ms")
				b.ReportMetric(pct(0.99), "late-p99-ms")
				b.ReportMetric(pct(1), "late-max-ms")
				b.ReportMetric(dM*1e6/float64(total), "master-cpu-us/timer")
				b.ReportMetric(dR*1e6/float64(total), "replica-cpu-us/timer")
				b.ReportMetric(float64(len(failed)), "failed-claims")
				if len(failed) > 0 {
					b.Logf("first failed claim: %s", failed[0])
				}
			}
		})
	}
}
