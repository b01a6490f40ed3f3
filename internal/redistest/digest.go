package redistest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
)

// Digest returns every key of namespace ns with its type and value, keys
// sorted: two equal digests mean nothing of the namespace was written in
// between. For a test that must show a refused request wrote nothing,
// whatever it would have written. It scans with the namespace's pattern,
// so it keeps to the test's own keys on a shared server; on a Cluster it
// sees only the node c reaches.
func Digest(tb testing.TB, c redis.UniversalClient, ns string) string {
	tb.Helper()
	ctx := context.Background()
	var keys []string
	iter := c.Scan(ctx, 0, keyspace.Namespace(ns).Pattern(), 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		tb.Fatalf("redistest: scanning namespace %s: %v", ns, err)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			tb.Fatalf("redistest: TYPE %s: %v", k, err)
		}
		var v any
		switch typ {
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "set":
			var m []string
			m, err = c.SMembers(ctx, k).Result()
			sort.Strings(m)
			v = m
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		case "stream":
			v, err = c.XRange(ctx, k, "-", "+").Result()
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			tb.Fatalf("redistest: reading %s %s: %v", typ, k, err)
		}
		fmt.Fprintf(&b, "%s %s %v\n", k, typ, v)
	}
	return b.String()
}
