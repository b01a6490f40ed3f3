package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
)

// reachServerTime brings the server's clock (Redis TIME, the only clock the
// scripts read) to at least at: miniredis's clock is set, so the test does
// not wait; a real server's clock is the wall clock and is awaited.
func reachServerTime(t *testing.T, b *redistest.Backend, at time.Time) {
	t.Helper()
	if b.Mini != nil {
		if serverNow(t, b).Before(at) {
			b.Mini.SetTime(at)
		}
		return
	}
	awaitServerTime(t, b.Client, at)
}

// awaitServerTime returns once the server's TIME is at or past at. It
// polls TIME: a real server's clock cannot be moved, and what the caller
// waits for is that clock, not the local one.
func awaitServerTime(t *testing.T, c redis.UniversalClient, at time.Time) {
	t.Helper()
	redistest.Eventually(t, time.Until(at)+10*time.Second, "the server clock to reach "+at.Format(time.RFC3339Nano), func() bool {
		now, err := c.Time(context.Background()).Result()
		if err != nil {
			t.Fatalf("TIME: %v", err)
		}
		return !now.Before(at)
	})
}
