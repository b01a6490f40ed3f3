package consistency_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/internal/consistency"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Shared(m)) }

// TestCheckNamesEachBrokenInvariant breaks one invariant of each kind
// Check knows in a namespace it first finds sound, and wants one line
// naming each; the counters' line only while the stream is not trimmed.
func TestCheckNamesEachBrokenInvariant(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q, err := queue.New(b.Client, queue.Options{Namespace: redistest.Namespace(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if _, err := q.Schedule(ctx, "sound", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		if bad, err := consistency.Check(ctx, b.Client, q, false); err != nil || bad != nil {
			t.Fatalf("a sound namespace: %q, %v", bad, err)
		}

		k := q.Keys().Shard(0)
		rdb := b.Client
		for _, err := range []error{
			rdb.HSet(ctx, k[1], "junk", "garbage").Err(),                  // malformed
			rdb.HSet(ctx, k[1], "half", "s::1000::p").Err(),               // scheduled, not in the due set
			rdb.ZAdd(ctx, k[2], redis.Z{Score: 5, Member: "ghost"}).Err(), // fired member, no record
			rdb.HIncrBy(ctx, k[6], "fired", 1).Err(),                      // counters say 1, stream holds 0
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		want := []string{
			`"ghost": member of ` + k[2] + ` without a record`,
			`"half": scheduled, but due=false fired=false cancelled=false stream entries=0`,
			`"junk": malformed record "garbage"`,
			`counters say 1 fired, the stream holds 0 entries`,
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
}
