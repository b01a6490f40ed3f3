package poller

import (
	"context"
	"math/rand/v2"
	"time"
)

// every runs step every interval, give or take a fifth so that replicas do
// not run it together, until ctx ends. The recurring repair pass and the
// bulk cancel jobs both run this way. After a failure it waits the claims'
// backoff on top of the interval, and it calls warn with the first failure
// of a run of them only, so that an outage costs few calls and logs once,
// not every interval. A step cut short by ctx ending is no failure: the
// loop just returns.
func (p *Poller) every(ctx context.Context, interval time.Duration, step func(context.Context) error, warn func(error)) {
	t := time.NewTimer(jittered(interval))
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := step(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if failures == 1 {
				warn(err)
			}
		} else {
			failures = 0
		}
		t.Reset(jittered(interval) + p.backoffOrZero(failures))
	}
}

func jittered(d time.Duration) time.Duration {
	return d*4/5 + rand.N(d*2/5)
}

func (p *Poller) backoffOrZero(failures int) time.Duration {
	if failures == 0 {
		return 0
	}
	return p.backoff(failures)
}
