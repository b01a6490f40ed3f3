package ctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/internal/cliconf"
)

// watchBlock is how long one XREAD blocks; short enough that a vanished
// Redis is noticed, long enough to cost nothing when idle.
const watchBlock = 2 * time.Second

// watch's backoff between reconnection attempts.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 2 * time.Second
)

type fireJSON struct {
	ID        string `json:"id"`
	DueAt     string `json:"due_at"`
	FiredAt   string `json:"fired_at"`
	LatenessM int64  `json:"lateness_ms"`
	Payload   []byte `json:"payload"`
}

// watch follows the fire stream from its current end. It is the one
// command that reads Redis itself: queue has no API to tail the stream
// without joining a consumer group, which would change what workers see.
func (r *runner) watch(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	s, err := r.open(c)
	if err != nil {
		return err
	}
	defer s.close()
	// Resolve "$" to an ID once per shard stream: re-sending "$" after an
	// idle XREAD would skip an entry added between two calls.
	ctx, cancel := s.ctx(c)
	shards, err := s.q.Shards(ctx)
	var keys, from []string
	for k := range shards {
		if err != nil {
			break
		}
		key := s.q.ShardStreamKey(k)
		var last []redis.XMessage
		last, err = s.rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
		id := "0-0"
		if len(last) > 0 {
			id = last[0].ID
		}
		keys, from = append(keys, key), append(from, id)
	}
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
		var res []redis.XStream
		if shards == 1 {
			res, err = s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{keys[0], from[0]}, Block: watchBlock, Count: 1000}).Result()
		} else {
			// One XREAD per shard stream (a Cluster refuses one over
			// several slots), pipelined, without BLOCK; a short sleep when
			// all are quiet.
			res, err = readShards(ctx, s.rdb, keys, from)
			if err == nil && len(res) == 0 {
				select {
				case <-time.After(watchPoll):
				case <-ctx.Done():
				}
			}
		}
		cancel()
		if c.Context.Err() != nil {
			return nil // Ctrl-C: a normal end
		}
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		if err != nil && cliconf.IsTransient(err) {
			// A lost connection or a failover: like the workers, retry
			// with backoff and resume after the last entry printed, so
			// that no fire is shown twice or skipped (the stream keeps
			// them while Redis is away).
			failures++
			select {
			case <-c.Context.Done():
				return nil // Ctrl-C, whose deadline may have failed the read
			case <-time.After(min(watchRetryMin<<min(failures-1, 5), watchRetryMax)):
			}
			if failures == 1 {
				fmt.Fprintf(r.o.Stderr, "timerctl: watch: lost Redis (%s); reconnecting, resuming after stream ID %s\n", oneLine(err.Error()), from)
			}
			continue
		}
		if err != nil {
			return s.redisErr(err)
		}
		if failures > 0 {
			fmt.Fprintf(r.o.Stderr, "timerctl: watch: reconnected after %d failed attempts; resuming after stream ID %s\n", failures, from)
			failures = 0
		}
		for _, st := range res {
			for _, m := range st.Messages {
				from[slices.Index(keys, st.Stream)] = m.ID
				if err := r.printFire(s.g.json, m); err != nil {
					return err
				}
			}
		}
	}
}

// watchPoll is the pause between rounds of a sharded namespace's reads
// when no shard had a new fire.
const watchPoll = 200 * time.Millisecond

// readShards reads every shard stream after its position, in one pipeline.
func readShards(ctx context.Context, rdb redis.UniversalClient, keys, from []string) ([]redis.XStream, error) {
	cmds := make([]*redis.XStreamSliceCmd, len(keys))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.XRead(ctx, &redis.XReadArgs{Streams: []string{k, from[i]}, Block: -1, Count: 1000})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []redis.XStream
	for _, c := range cmds {
		out = append(out, c.Val()...)
	}
	return out, nil
}

func (r *runner) printFire(asJSON bool, m redis.XMessage) error {
	field := func(k string) string { v, _ := m.Values[k].(string); return v }
	ms := func(k string) time.Time {
		n, _ := strconv.ParseInt(field(k), 10, 64)
		return time.UnixMilli(n).UTC()
	}
	due, fired := ms("due"), ms("fired")
	late := fired.Sub(due)
	if asJSON {
		// One compact object per line, so the output is JSON Lines.
		line, err := jsonLine(fireJSON{ID: field("id"), DueAt: fmtJSONTime(due), FiredAt: fmtJSONTime(fired),
			LatenessM: late.Milliseconds(), Payload: []byte(field("payload"))})
		if err != nil {
			return err
		}
		_, err = r.o.Stdout.Write(line)
		return err
	}
	_, err := fmt.Fprintf(r.o.Stdout, "%-24s  due %s  fired %s  late %s\n",
		field("id"), due.Format(jsonTime), fired.Format(jsonTime), lateness(late))
	return err
}
