package poller

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestEveryBacksOffAndWarnsOncePerOutage: the loop behind the recurring
// repair pass and the bulk cancel jobs waits the backoff after a failure,
// not after a success, warns for the first failure of a run only, and
// returns, without a warning, when ctx ends during a step.
func TestEveryBacksOffAndWarnsOncePerOutage(t *testing.T) {
	const interval, backoff = 10 * time.Millisecond, 60 * time.Millisecond
	p := &Poller{opts: Options{BackoffMin: backoff, BackoffMax: backoff}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fail := errors.New("down")
	results := []error{fail, fail, nil, fail, nil} // then ctx ends mid-step
	var starts []time.Time
	var warned []int // the step (0-based) each warning followed
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.every(ctx, interval, func(context.Context) error {
			starts = append(starts, time.Now())
			if i := len(starts) - 1; i < len(results) {
				return results[i]
			}
			cancel()
			return fail
		}, func(err error) {
			if !errors.Is(err, fail) {
				t.Errorf("warned with %v, want %v", err, fail)
			}
			warned = append(warned, len(starts)-1)
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("every did not return after ctx ended")
	}
	if len(starts) != len(results)+1 {
		t.Fatalf("ran %d steps, want %d", len(starts), len(results)+1)
	}
	if want := []int{0, 3}; len(warned) != len(want) || warned[0] != want[0] || warned[1] != want[1] {
		t.Errorf("warned after steps %v, want %v: the first failure of each run, none for the step ctx cut short (the warning after step 3 shows the success before it ended the run)", warned, want)
	}
	// After a failure the wait is the interval (at least 4/5 of it) plus
	// the backoff (at least half of it).
	minAfterFailure := interval*4/5 + backoff/2
	for i, err := range results {
		gap := starts[i+1].Sub(starts[i])
		if err != nil && gap < minAfterFailure {
			t.Errorf("step %d failed and the next ran %v later, want at least %v (the backoff)", i, gap, minAfterFailure)
		}
	}
	// Stopping while waiting returns too.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	p.every(ctx2, time.Hour, func(context.Context) error {
		t.Error("a step ran after ctx ended")
		return nil
	}, func(error) {})
}
