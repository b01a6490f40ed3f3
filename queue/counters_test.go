package queue_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/scripts/lua"
)

// TestCountersMatchFires: the counters claim.lua keeps agree with what the
// claims returned, timer by timer, bucket by bucket.
func TestCountersMatchFires(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		now := serverNow(t, b)
		lates := []time.Duration{0, 3 * time.Millisecond, 40 * time.Millisecond, 2 * time.Second, 7 * time.Minute, time.Hour}
		for i, late := range lates {
			for j := range 3 {
				schedule(t, q, fmt.Sprint("t-", i, "-", j), now.Add(-late))
			}
		}
		schedule(t, q, "later", now.Add(time.Hour))
		var fired []queue.Fired
		for len(fired) < 3*len(lates) {
			res, err := q.Engine().Claim(ctx, 5) // several claims, each adding its own
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Fired) == 0 {
				t.Fatalf("fired %d of %d", len(fired), 3*len(lates))
			}
			fired = append(fired, res.Fired...)
		}
		got, err := q.Inspect().Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := queue.Counters{Fired: int64(len(fired)), Lateness: make([]int64, len(queue.LatenessBuckets))}
		for _, f := range fired {
			want.LatenessSum += f.Lateness()
			for i, bound := range queue.LatenessBuckets {
				if f.Lateness() <= bound {
					want.Lateness[i]++
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Counters = %+v\nwant       %+v", got, want)
		}
		if want.Lateness[len(want.Lateness)-1] == want.Fired {
			t.Fatal("no timer beyond the last bucket: the test misses the overflow")
		}
	})
}

// TestLatenessBucketsMatchScripts: the Go bounds are those every script
// that counts lateness (includes late_field, scripts/lua/includes) counts
// by, bound for bound and field for field.
func TestLatenessBucketsMatchScripts(t *testing.T) {
	var want []string
	for _, b := range queue.LatenessBuckets {
		want = append(want, fmt.Sprint(b.Milliseconds()))
	}
	bound := regexp.MustCompile(`late <= (\d+) then return 'late_le_(\d+)'`)
	counting := 0
	for _, s := range lua.All {
		if !strings.Contains(s.Source, "local function late_field(") {
			continue
		}
		counting++
		var got []string
		for _, m := range bound.FindAllStringSubmatch(s.Source, -1) {
			if m[1] != m[2] {
				t.Errorf("%s: late_field counts a lateness <= %s in late_le_%s", s.Name, m[1], m[2])
			}
			got = append(got, m[1])
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: late_field bounds = %s, queue.LatenessBuckets = %s", s.Name, strings.Join(got, ","), strings.Join(want, ","))
		}
	}
	// claim and commit write the counters.
	if counting < 2 {
		t.Errorf("%d scripts include late_field, want claim and commit at least", counting)
	}
}
