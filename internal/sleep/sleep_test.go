package sleep_test

import (
	"context"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/sleep"
)

// TestForEndsWithItsContext: For reports a live context after waiting,
// and a cancelled one at once rather than after d.
func TestForEndsWithItsContext(t *testing.T) {
	if !sleep.For(context.Background(), time.Millisecond) {
		t.Fatal("For on a live context reported it ended")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- sleep.For(ctx, time.Hour) }()
	cancel()
	select {
	case live := <-done:
		if live {
			t.Fatal("For on a cancelled context reported it live")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("For did not end with its context")
	}
}
