package consistency_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/consistency"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Shared(m)) }

// soundQueue returns a queue on a namespace of its own at layout layout,
// holding one timer in each state, which Check finds sound.
func soundQueue(t *testing.T, b *redistest.Backend, layout int) *queue.Queue {
	t.Helper()
	ctx := context.Background()
	q, err := queue.New(b.Client, queue.Options{Namespace: redistest.Namespace(t), Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	for _, id := range []string{"sound", "fired", "cancelled"} {
		due := time.Now().Add(time.Hour)
		if id == "fired" {
			due = time.Now().Add(-time.Second)
		}
		if _, err := q.Schedule(ctx, id, due, nil); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := q.Engine().Claim(ctx, 10); err != nil || len(res.Fired) != 1 {
		t.Fatalf("Claim = %+v, %v; want one fired", res, err)
	}
	if _, err := q.Cancel(ctx, "cancelled"); err != nil {
		t.Fatal(err)
	}
	for layout == 2 {
		st, err := q.Engine().UpgradeLayout(ctx, queue.MaxBatch)
		if err != nil {
			t.Fatal(err)
		}
		if st.Done() {
			break
		}
	}
	if bad, err := consistency.Check(ctx, b.Client, q, false); err != nil || bad != nil {
		t.Fatalf("a sound namespace at layout %d: %q, %v", layout, bad, err)
	}
	return q
}

// TestCheckNamesEachBrokenInvariant breaks one invariant of each kind
// Check knows in a namespace it first finds sound, and wants one line
// naming each; the counters' line only while the stream is not trimmed;
// in either layout.
func TestCheckNamesEachBrokenInvariant(t *testing.T) {
	for _, layout := range []int{1, 2} {
		t.Run(fmt.Sprint("layout", layout), func(t *testing.T) {
			redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				q := soundQueue(t, b, layout)
				k := q.Keys().Shard(0)
				rdb := b.Client
				for _, err := range []error{
					rdb.HSet(ctx, k[1], "junk", "garbage").Err(),                  // malformed
					rdb.HSet(ctx, k[1], "half", "s::1000::p").Err(),               // scheduled, not in the due set
					rdb.ZAdd(ctx, k[2], redis.Z{Score: 5, Member: "ghost"}).Err(), // fired member, no record (a due one in layout 2)
					rdb.HIncrBy(ctx, k[6], "fired", 1).Err(),                      // counters say 2, stream holds 1
				} {
					if err != nil {
						t.Fatal(err)
					}
				}
				want := []string{
					`"ghost": member of ` + k[2] + ` without a record`,
					`"half": scheduled, but due=false fired=false cancelled=false stream entries=0`,
					`"junk": malformed record "garbage"`,
					`counters say 2 fired, the stream holds 1 entries`,
				}
				bad, err := consistency.Check(ctx, rdb, q, false)
				if err != nil || !slices.Equal(bad, want) {
					t.Fatalf("got (%v)\n%s\nwant\n%s", err, strings.Join(bad, "\n"), strings.Join(want, "\n"))
				}
				bad, err = consistency.Check(ctx, rdb, q, true)
				if err != nil || !slices.Equal(bad, want[:3]) {
					t.Fatalf("trimmed: got (%v)\n%s\nwant\n%s", err, strings.Join(bad, "\n"), strings.Join(want[:3], "\n"))
				}
			})
		})
	}
}

// TestCheckReadsLayout2Bands breaks, in a namespace upgraded to layout 2,
// each invariant of the bands that hold its settled timers: a fired timer
// in the cancelled band, a cancelled one at a cancel time its record does
// not hold, a scheduled one in the fired band, a settled one left in
// layout 1's set beside its band, and layout 1's expire set left behind;
// and wants one line naming each.
func TestCheckReadsLayout2Bands(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := soundQueue(t, b, 2)
		rdb := b.Client
		k := q.Keys().Shard(0)
		sched := keyspace.Shard(q.Namespace(), 0, 1).Sched()
		legacy := keyspace.Shard(q.Namespace(), 0, 1)
		if k[0] != sched || k[2] != sched {
			t.Fatalf("keys %v, want layout 2's", k)
		}
		score := func(id string) float64 {
			t.Helper()
			s, err := rdb.ZScore(ctx, sched, id).Result()
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		const band = 1 << 50
		fired, cancelled, sound := score("fired"), score("cancelled"), score("sound")
		for _, err := range []error{
			rdb.ZAdd(ctx, sched, redis.Z{Score: fired + band, Member: "fired"}).Err(),      // into the cancelled band
			rdb.ZAdd(ctx, sched, redis.Z{Score: cancelled + 1, Member: "cancelled"}).Err(), // 1 ms after it was cancelled
			rdb.ZAdd(ctx, sched, redis.Z{Score: sound + band, Member: "sound"}).Err(),      // a scheduled one in the fired band
			rdb.ZAdd(ctx, legacy.Expire(), redis.Z{Score: 5, Member: "fired"}).Err(),       // layout 1's expire set
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		bad, err := consistency.Check(ctx, rdb, q, false)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(bad, "\n")
		for _, want := range []string{
			`"cancelled": cancelled, but due=false fired=false cancelled=1 (score ` + fmt.Sprintf("%.0f", cancelled+1) + `, want ` + fmt.Sprintf("%.0f", cancelled),
			`"fired": fired, but due=false fired=0`,
			`"fired": member of ` + sched + `'s cancelled band, but its record is "f:`,
			`"sound": scheduled, but due=false fired=true cancelled=false`,
			`"sound": member of ` + sched + `'s fired band, but its record is "s:`,
			legacy.Expire() + `: a shard of layout 2 with nothing left to drain keeps it`,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("no line says %s in\n%s", want, got)
			}
		}
		if len(bad) != 6 {
			t.Errorf("%d lines, want 6:\n%s", len(bad), got)
		}

		// A fired timer both in its band and in layout 1's fired set, at
		// its due time as layout 1 keeps it, is in two places.
		if err := rdb.Del(ctx, legacy.Expire()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, sched, redis.Z{Score: fired, Member: "fired"}).Err(); err != nil {
			t.Fatal(err)
		}
		tm, err := q.Get(ctx, "fired")
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, legacy.Fired(), redis.Z{Score: float64(tm.Due.UnixMilli()), Member: "fired"}).Err(); err != nil {
			t.Fatal(err)
		}
		bad, err = consistency.Check(ctx, rdb, q, false)
		if err != nil || len(bad) != 4 || !strings.Contains(strings.Join(bad, "\n"), `"fired": fired, but due=false fired=2`) {
			t.Fatalf("fired in its band and in %s: %v\n%s", legacy.Fired(), err, strings.Join(bad, "\n"))
		}
		// Alone in layout 1's set, as an upgrade still draining left it,
		// it is sound.
		if err := rdb.ZRem(ctx, sched, "fired").Err(); err != nil {
			t.Fatal(err)
		}
		bad, err = consistency.Check(ctx, rdb, q, false)
		if err != nil || len(bad) != 3 || strings.Contains(strings.Join(bad, "\n"), `"fired"`) {
			t.Fatalf("fired left to drain in %s: %v\n%s", legacy.Fired(), err, strings.Join(bad, "\n"))
		}
	})
}
