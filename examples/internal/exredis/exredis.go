// Package exredis is the set-up the examples share: which Redis to use, and
// a stand-in for timerworker when there is none.
package exredis

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// URLVar names the environment variable holding the Redis URL.
const URLVar = "TIMERQ_REDIS_URL"

// Redis is the Redis an example runs against.
type Redis struct {
	Client *redis.Client
	// InMemory is true when no URL was given and Client reaches a miniredis
	// inside this process: nothing survives the process, and no timerworker
	// can reach it, so the example must fire its own timers.
	InMemory bool
	mini     *miniredis.Miniredis
}

// Connect returns a client of the Redis at $TIMERQ_REDIS_URL, or of a
// miniredis started in this process when the variable is unset.
func Connect() (*Redis, error) {
	r := &Redis{}
	url := os.Getenv(URLVar)
	if url == "" {
		m, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("starting the in-memory Redis: %w", err)
		}
		r.mini, r.InMemory, url = m, true, "redis://"+m.Addr()
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", URLVar, err)
	}
	// Lets a cancelled context interrupt blocking reads (Consume's
	// XREADGROUP BLOCK), so the examples stop promptly.
	opts.ContextTimeoutEnabled = true
	r.Client = redis.NewClient(opts)
	if err := r.Client.Ping(context.Background()).Err(); err != nil {
		r.Close()
		return nil, fmt.Errorf("cannot reach Redis at %s=%s: %w", URLVar, opts.Addr, err)
	}
	return r, nil
}

// Describe says which Redis this is, for the examples' first output line.
func (r *Redis) Describe() string {
	if r.InMemory {
		return "in-memory Redis (miniredis) in this process; set " + URLVar + " to use a real one"
	}
	return "Redis at " + r.Client.Options().Addr
}

// Close closes the client, and stops the miniredis if there is one.
func (r *Redis) Close() {
	if r.Client != nil {
		_ = r.Client.Close()
	}
	if r.mini != nil {
		r.mini.Close()
	}
}

// StartPoller runs a poller for q in the background, standing in for
// timerworker, and returns a function that stops it and waits for it. Only
// warnings are logged, to stderr, to keep the examples' output readable.
func StartPoller(q *queue.Queue, rdb redis.UniversalClient, hooks poller.Hooks) (stop func(), err error) {
	p, err := poller.New(q, poller.Options{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Hooks:  hooks,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Run(ctx) })
	return func() { cancel(); wg.Wait() }, nil
}
