// Package sleep is the one wait for a duration that ends early when its
// context does, for back-offs and polls: time.Sleep would hold a goroutine
// past the end of its owner.
package sleep

import (
	"context"
	"time"
)

// For waits d, or until ctx ends, and reports whether ctx is still live:
// false means the caller should stop.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
