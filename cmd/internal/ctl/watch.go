package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// watchBlock is how long one XREAD blocks; short enough that a vanished
// Redis is noticed, long enough to cost nothing when idle.
const watchBlock = 2 * time.Second

// watch's backoff between reconnection attempts.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 2 * time.Second
)

// fireJSON is a fire as `timerctl watch -o json` prints it: the API's
// fire event, and how late it fired.
type fireJSON struct {
	api.FireEventJSON
	LatenessMS int64 `json:"lateness_ms"`
}

// watch follows the namespace's fire streams from their current end, with
// queue.ReadFires: it joins no consumer group, so workers see no
// difference, and on a sharded namespace it follows every shard's stream.
func (r *runner) watch(c *cli.Context) error {
	s, err := r.open(c)
	if err != nil {
		return err
	}
	defer s.close()
	// Fix the starting point once: where each shard's stream ends now.
	ctx, cancel := s.ctx(c)
	_, from, err := s.q.Inspect().RecentFires(ctx, 1)
	cancel()
	if err != nil {
		return s.redisErr(err)
	}
	if !s.g.json {
		fmt.Fprintf(r.o.Stderr, "watching fires in namespace %q; Ctrl-C to stop\n", s.g.namespace)
	}
	if r.o.Watching != nil {
		r.o.Watching()
	}
	failures := 0
	for {
		ctx, cancel := context.WithTimeout(c.Context, watchBlock+s.g.timeout)
		page, err := s.q.ReadFires(ctx, queue.ReadFiresOptions{Limit: queue.MaxBatch, Cursor: from, Block: watchBlock})
		cancel()
		if c.Context.Err() != nil {
			return nil // Ctrl-C: a normal end
		}
		if err != nil && queue.Transient(err) {
			// A lost connection or a failover (UNBLOCKED included): like
			// the workers, retry with backoff and resume after the last
			// entry printed, so that no fire is shown twice or skipped
			// (the stream keeps them while Redis is away).
			failures++
			select {
			case <-c.Context.Done():
				return nil // Ctrl-C, whose deadline may have failed the read
			case <-time.After(min(watchRetryMin<<min(failures-1, 5), watchRetryMax)):
			}
			switch {
			case failures > 1:
			case redis.HasErrorPrefix(err, "UNBLOCKED"):
				// Not a lost connection: the server ended the blocked read.
				fmt.Fprintf(r.o.Stderr, "timerctl: watch: Redis ended the read (%s), as REPLICAOF in a failover or CLIENT UNBLOCK does; reading again, resuming after stream position %s\n",
					cliconf.OneLine(err.Error()), from)
			default:
				fmt.Fprintf(r.o.Stderr, "timerctl: watch: lost Redis (%s); reconnecting, resuming after stream position %s\n", cliconf.OneLine(err.Error()), from)
			}
			continue
		}
		if err != nil {
			return s.redisErr(err)
		}
		if failures > 0 {
			fmt.Fprintf(r.o.Stderr, "timerctl: watch: reconnected after %d failed attempts; resuming after stream position %s\n", failures, from)
			failures = 0
		}
		for _, ev := range page.Events {
			if err := r.printFire(s.g.json, ev); err != nil {
				return err
			}
		}
		from = page.NextCursor
	}
}

func (r *runner) printFire(asJSON bool, ev queue.Event) error {
	due, fired := ev.Due.UTC(), ev.FiredAt.UTC()
	late := fired.Sub(due)
	if asJSON {
		// One compact object per line, so the output is JSON Lines.
		return json.NewEncoder(r.o.Stdout).Encode(fireJSON{FireEventJSON: api.ToFireEventJSON(ev), LatenessMS: late.Milliseconds()})
	}
	_, err := fmt.Fprintf(r.o.Stdout, "%-24s  due %s  fired %s  late %s\n",
		ev.ID, due.Format(timefmt.Layout), fired.Format(timefmt.Layout), lateness(late))
	return err
}
