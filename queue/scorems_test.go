package queue_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
)

// TestScoreMsOfMatchesScoreMs: claim.lua takes a fired timer's due
// millisecond from its score with score_ms_of, which skips score_ms's
// parse and format in the common case. Over scores as Redis prints them
// (the due set's own replies), including fractions at the edge of the
// microsecond rounding and whole parts of every length, it must give
// exactly what ms_of(score_ms(score)) gives.
func TestScoreMsOfMatchesScoreMs(t *testing.T) {
	var src strings.Builder
	for _, name := range []string{"fmt", "max_ms", "fmt_due", "score_ms", "ms_of", "score_ms_of"} {
		b, err := os.ReadFile("../scripts/lua/includes/" + name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	src.WriteString(`
local out = {}
local scores = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 2, #scores, 2 do
  local s = scores[i]
  local want = score_ms(s)
  if want then want = ms_of(want) end
  local got = score_ms_of(s)
  if got ~= want then out[#out + 1] = s .. ' ' .. tostring(got) .. ' ' .. tostring(want) end
end
return out`)
	script := redis.NewScript(src.String())

	// Scores: whole parts of every length up to 15 digits (and 16, past
	// MAX_MS), each with fractions around .9995 and the microsecond
	// values timerq writes, plus doubles a hand-written ZADD may hold.
	var scores []float64
	fracs := []float64{0, 0.001, 0.0005, 0.5, 0.984, 0.984375, 0.998, 0.999, 0.9994, 0.99949, 0.9995, 0.99951, 0.9999, 0.99999999}
	for digits := 1; digits <= 16; digits++ {
		for _, whole := range []float64{math.Pow(10, float64(digits-1)), math.Pow(10, float64(digits)) - 1} {
			for _, f := range fracs {
				scores = append(scores, whole+f)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		ms := float64(rng.Int64N(253402300799999 + 1))
		scores = append(scores, ms+float64(rng.IntN(1000))/1000, ms+rng.Float64())
	}
	scores = append(scores, 253402300799999, 253402300799999.999, 253402300800000, -1, -0.5, 1e-7, math.Inf(1), math.Inf(-1))

	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		key := "timerq:{" + redistest.Namespace(t) + "}:due"
		for i := 0; i < len(scores); i += 500 {
			var zs []redis.Z
			for j, s := range scores[i:min(i+500, len(scores))] {
				zs = append(zs, redis.Z{Score: s, Member: strconv.Itoa(i + j)})
			}
			if err := b.Client.ZAdd(ctx, key, zs...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { b.Client.Del(context.Background(), key) })
		bad, err := script.Run(ctx, b.Client, []string{key}).StringSlice()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		for _, m := range bad {
			t.Errorf("score %s: score_ms_of and ms_of(score_ms) differ: %s", strings.Fields(m)[0], m)
		}
	})
}
