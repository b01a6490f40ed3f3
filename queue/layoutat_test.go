package queue_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/queue"
)

// The tests that read or write a shard's keys directly name them through
// the layout the shard is at (docs/redis-layout.md, "Layout 2"), so that
// they hold for a namespace of either layout: TIMERQ_TEST_LAYOUT=2 runs
// the suite with every namespace upgraded when a Queue first reads it.

// spaceAt returns shard k of q's namespace, naming its keys as the layout
// the shard is at in Redis names them: layout 2 when its legacy due key
// holds layout 2's marker, else layout 1. It makes q read the namespace
// first, as a test's first call would (and, under TIMERQ_TEST_LAYOUT=2,
// upgrade it), so that what it reads is what q's calls see.
func spaceAt(t *testing.T, rdb redis.UniversalClient, q *queue.Queue, k int) keyspace.Space {
	t.Helper()
	ctx := context.Background()
	n, err := q.Inspect().Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sp := keyspace.Shard(q.Namespace(), k, n)
	if v, err := rdb.Get(ctx, sp.LegacyDue()).Result(); err == nil && v == keyspace.LayoutMarker(2) {
		return sp.AtLayout(2)
	}
	return sp.AtLayout(1)
}

// keysAt returns shard k's keys in the order the scripts take them
// (queue.Keys.Shard) once q has read the namespace, and so learned the
// shard's layout.
func keysAt(t *testing.T, q *queue.Queue, k int) []string {
	t.Helper()
	if _, err := q.Inspect().Shards(context.Background()); err != nil {
		t.Fatal(err)
	}
	return q.Keys().Shard(k)
}

// isMarker reports whether key holds exactly the marker an upgrade to
// layout 2 leaves in a shard's legacy due key: not data.
func isMarker(t *testing.T, rdb redis.UniversalClient, key string) bool {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	return err == nil && v == keyspace.LayoutMarker(2)
}

// bandOf is where layout 2's sched set keeps a settled timer of state
// state ('f' fired, 'c' cancelled), above every due time
// (scripts/lua/includes/pending_end.lua): its score is the band plus the
// time it settled, in ms.
func bandOf(state byte) float64 {
	if state == 'c' {
		return 1 << 51
	}
	return 1 << 50
}
