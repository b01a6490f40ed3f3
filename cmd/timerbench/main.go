// Command timerbench measures timerq: one subcommand per scenario (burst,
// steady, ceiling, memory, scale, waiters, or all of them), against a Redis
// it may wipe; and chaos, which kills workers and Redis while timers come
// due and counts what was lost, doubled or early. Without --redis it starts a private redis-server on a free
// port and stops it afterwards. Timers are fired by real timerworker
// processes, built with go build unless --worker-bin names one.
//
//	timerbench burst --timers 100000 --workers 4
//	timerbench steady --json --rate 10000 --duration 20s --plot docs/bench/steady-lateness.png
//	timerbench all --redis redis://127.0.0.1:6400/0 --force
//	timerbench chaos --json --timers 20000 --workers 4 --kill-every 500ms --redis-crashes 2
//
// Every subcommand takes the common flags (--redis, --force, --namespace,
// --worker-bin, --workers, --batch-size, --json) after its name.
//
// See BENCHMARKS.md for the figures and how they were measured.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/cmd/internal/bench"
)

// quietRedis drops go-redis's own log lines (a failed dial each time chaos
// kills Redis, on purpose); every error that matters reaches the caller.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp(os.Stdout, os.Stderr).RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "timerbench: "+strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	common := []cli.Flag{
		&cli.StringFlag{Name: "redis", Usage: "URL of a Redis database the bench may wipe (empty: start a private redis-server on a free port)"},
		&cli.StringFlag{Name: "redis-server", Value: "redis-server", Usage: "redis-server binary used when --redis is empty"},
		&cli.BoolFlag{Name: "force", Usage: "wipe the --redis database even if it holds keys"},
		&cli.StringFlag{Name: "namespace", Value: "bench", Usage: "timerq namespace"},
		&cli.StringFlag{Name: "worker-bin", Usage: "timerworker binary (empty: go build one into a temporary directory)"},
		&cli.IntFlag{Name: "workers", Value: 4, Usage: "timerworker processes"},
		&cli.IntFlag{Name: "batch-size", Value: 256, Usage: "the workers' --batch-size"},
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object per scenario instead of a table"},
		&cli.BoolFlag{Name: "quiet", Usage: "no progress lines on stderr"},
		&cli.BoolFlag{Name: "trace", Usage: "OpenTelemetry tracing on in the bench and the workers, every timer traced, spans sent to an OTLP sink in timerbench that drops them"},
	}
	burst := []cli.Flag{
		&cli.IntFlag{Name: "timers", Value: 100_000, Usage: "burst: timers due at one instant"},
		&cli.DurationFlag{Name: "lead", Value: 5 * time.Second, Usage: "burst: how far ahead the instant is"},
	}
	steady := []cli.Flag{
		&cli.IntFlag{Name: "rate", Value: 10_000, Usage: "steady: timers due per second"},
		&cli.DurationFlag{Name: "duration", Value: 20 * time.Second, Usage: "steady: how long"},
		&cli.DurationFlag{Name: "steady-lead", Value: 3 * time.Second, Usage: "steady: how long before due each timer is scheduled"},
		&cli.IntFlag{Name: "wake-every", Value: 20, Usage: "steady: one timer in this many gets a Wait-er"},
		&cli.StringFlag{Name: "plot", Usage: "steady: write the lateness CDF here (.png or .svg)"},
	}
	ceiling := []cli.Flag{
		&cli.IntFlag{Name: "ceiling-timers", Value: 100_000, Usage: "ceiling: pre-due timers claimed"},
		&cli.IntFlag{Name: "limit", Value: 1000, Usage: "ceiling: Claim limit"},
	}
	memory := []cli.Flag{
		&cli.IntFlag{Name: "memory-timers", Value: 1_000_000, Usage: "memory: pending timers"},
	}
	scale := []cli.Flag{
		&cli.StringFlag{Name: "pending", Value: "10000,1000000,10000000", Usage: "scale: comma-separated pending counts, ascending"},
		&cli.IntFlag{Name: "due", Value: 100_000, Usage: "scale: due timers claimed at each level"},
	}
	waiters := []cli.Flag{
		&cli.IntFlag{Name: "waiters", Value: 100_000, Usage: "waiters: concurrent Wait calls"},
		&cli.DurationFlag{Name: "waiters-lead", Value: 10 * time.Second, Usage: "waiters: time to subscribe before the first is due"},
		&cli.DurationFlag{Name: "spread", Value: 5 * time.Second, Usage: "waiters: due times spread over this long"},
	}
	recurring := []cli.Flag{
		&cli.IntFlag{Name: "schedules", Value: 10_000, Usage: "recurring: schedules, each every --every"},
		&cli.DurationFlag{Name: "every", Value: time.Second, Usage: "recurring: each schedule's interval"},
		&cli.DurationFlag{Name: "recurring-duration", Value: 20 * time.Second, Usage: "recurring: the measured window"},
	}
	apiFlags := []cli.Flag{
		&cli.DurationFlag{Name: "api-duration", Value: 10 * time.Second, Usage: "api: each throughput phase's length"},
		&cli.IntFlag{Name: "api-conns", Value: 64, Usage: "api: HTTP connections (and Go goroutines) for single creates"},
		&cli.IntFlag{Name: "api-batch-conns", Value: 4, Usage: "api: concurrent batch creates of 1000"},
		&cli.IntFlag{Name: "api-wait-rate", Value: 2000, Usage: "api: timers due per second in the long-poll phase (one in 20 waited)"},
		&cli.IntFlag{Name: "api-waiters", Value: 10_000, Usage: "api: concurrent long polls held open on the API replica"},
		&cli.IntFlag{Name: "api-consume-events", Value: 50_000, Usage: "api: fire events pull-consumed over HTTP, 100 a lease"},
	}
	chaos := []cli.Flag{
		&cli.IntFlag{Name: "timers", Value: 20_000, Usage: "chaos: timers due over --window"},
		&cli.DurationFlag{Name: "window", Value: 10 * time.Second, Usage: "chaos: the span the due times cover"},
		&cli.DurationFlag{Name: "lead", Value: time.Second, Usage: "chaos: how long before its due time each timer is scheduled"},
		&cli.DurationFlag{Name: "kill-every", Value: 500 * time.Millisecond, Usage: "chaos: SIGKILL a random timerworker this often, and start another (0: never)"},
		&cli.IntFlag{Name: "redis-crashes", Usage: "chaos: SIGKILL redis-server this many times in the window, and restart it from its AOF"},
		&cli.DurationFlag{Name: "redis-down", Value: 500 * time.Millisecond, Usage: "chaos: how long Redis stays down at each crash"},
		&cli.DurationFlag{Name: "settle", Value: 30 * time.Second, Usage: "chaos: how long to wait after the window for the last timers before counting them lost"},
		&cli.StringFlag{Name: "appendfsync", Value: "always", Usage: "chaos: the private redis-server's AOF policy: always, everysec, no, or off (no AOF)"},
		&cli.IntFlag{Name: "shards", Value: 1, Usage: "chaos: the namespace's shards, shared by the workers by membership (1: unsharded)"},
	}
	type scenario struct {
		name, usage string
		flags       []cli.Flag
		run         func(*cli.Context, *bench.Env) (any, error)
	}
	runs := map[string]func(*cli.Context, *bench.Env) (any, error){
		"burst": func(c *cli.Context, e *bench.Env) (any, error) {
			return e.Burst(c.Context, bench.BurstConfig{Timers: c.Int("timers"), Lead: c.Duration("lead")})
		},
		"steady": func(c *cli.Context, e *bench.Env) (any, error) {
			return e.Steady(c.Context, bench.SteadyConfig{Rate: c.Int("rate"), Duration: c.Duration("duration"),
				Lead: c.Duration("steady-lead"), WakeEvery: c.Int("wake-every"), PlotPath: c.String("plot")})
		},
		"ceiling": func(c *cli.Context, e *bench.Env) (any, error) {
			return e.Ceiling(c.Context, bench.CeilingConfig{Timers: c.Int("ceiling-timers"), Limit: c.Int("limit")})
		},
		"memory": func(c *cli.Context, e *bench.Env) (any, error) {
			return e.Memory(c.Context, bench.MemoryConfig{Timers: c.Int("memory-timers")})
		},
		"scale": func(c *cli.Context, e *bench.Env) (any, error) {
			pending, err := parseInts(c.String("pending"))
			if err != nil {
				return nil, err
			}
			return e.Scale(c.Context, bench.ScaleConfig{Pending: pending, Due: c.Int("due")})
		},
		"recurring": func(c *cli.Context, e *bench.Env) (any, error) {
			return e.Recurring(c.Context, bench.RecurringConfig{Schedules: c.Int("schedules"), Every: c.Duration("every"),
				Duration: c.Duration("recurring-duration")})
		},
		"api": func(c *cli.Context, e *bench.Env) (any, error) {
			return e.API(c.Context, bench.APIConfig{Duration: c.Duration("api-duration"), Conns: c.Int("api-conns"),
				BatchConns: c.Int("api-batch-conns"), WaitRate: c.Int("api-wait-rate"), Waiters: c.Int("api-waiters"),
				ConsumeEvents: c.Int("api-consume-events")})
		},
		"waiters": func(c *cli.Context, e *bench.Env) (any, error) {
			return e.Waiters(c.Context, bench.WaitersConfig{Waiters: c.Int("waiters"),
				Lead: c.Duration("waiters-lead"), Spread: c.Duration("spread")})
		},
	}
	scenarios := []scenario{
		{"burst", "N timers due at one instant, fired by --workers timerworkers; also runs ceiling for ceiling_ratio", burst, runs["burst"]},
		{"steady", "a constant rate of timers coming due: lateness and wake percentiles", steady, runs["steady"]},
		{"ceiling", "claim.lua back to back from one connection, no worker logic", ceiling, runs["ceiling"]},
		{"memory", "Redis bytes per pending timer, and per member of a bare sorted set", memory, runs["memory"]},
		{"scale", "claim throughput with 10k, 1M and 10M timers pending", scale, runs["scale"]},
		{"recurring", "interval schedules fired by --workers timerworkers: occurrences/s, lateness, memory", recurring, runs["recurring"]},
		{"waiters", "many concurrent Wait calls in one process: connections, heap, latency", waiters, runs["waiters"]},
		{"api", "the HTTP API on an API-only timerworker beside the Go API: creates, batches, long polls, open waits, pull-consume", apiFlags, runs["api"]},
	}
	open := func(c *cli.Context) (*bench.Env, error) {
		log := stderr
		if c.Bool("quiet") {
			log = io.Discard
		}
		return bench.Open(c.Context, bench.Config{
			RedisURL: c.String("redis"), RedisServer: c.String("redis-server"), Force: c.Bool("force"),
			Namespace: c.String("namespace"), WorkerBin: c.String("worker-bin"),
			Workers: c.Int("workers"), BatchSize: c.Int("batch-size"), Log: log,
			AppendFsync: c.String("appendfsync"), Trace: c.Bool("trace"),
		})
	}
	var cmds []*cli.Command
	var allFlags []cli.Flag
	for _, s := range scenarios {
		allFlags = append(allFlags, s.flags...)
		cmds = append(cmds, &cli.Command{
			Name: s.name, Usage: s.usage, Flags: append(append([]cli.Flag(nil), common...), s.flags...),
			Action: func(c *cli.Context) error {
				e, err := open(c)
				if err != nil {
					return err
				}
				defer e.Close()
				r, err := s.run(c, e)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				return bench.Write(stdout, r, c.Bool("json"))
			},
		})
	}
	cmds = append(cmds, &cli.Command{
		Name: "all", Usage: "every scenario in turn, with their flags", Flags: append(append([]cli.Flag(nil), common...), allFlags...),
		Action: func(c *cli.Context) error {
			e, err := open(c)
			if err != nil {
				return err
			}
			defer e.Close()
			for _, s := range scenarios {
				r, err := s.run(c, e)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				if err := bench.Write(stdout, r, c.Bool("json")); err != nil {
					return err
				}
			}
			return nil
		},
	})
	// cluster starts its own Cluster, so it takes none of the --redis flags.
	cmds = append(cmds, &cli.Command{
		Name:  "cluster",
		Usage: "start a 1- or 3-master Redis Cluster: a burst over a sharded namespace (fires/s, lateness, Redis CPU per fire and share of fires per master), then a worker's idle cost as the shard count grows",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "cluster", Value: 3, Usage: "masters of the Cluster to start"},
			&cli.IntFlag{Name: "shards", Value: 16, Usage: "shards of the burst namespace"},
			&cli.IntFlag{Name: "timers", Value: 100_000, Usage: "timers due at one instant"},
			&cli.DurationFlag{Name: "lead", Value: 5 * time.Second, Usage: "how far ahead the instant is"},
			&cli.IntFlag{Name: "workers", Value: 2, Usage: "timerworker processes"},
			&cli.IntFlag{Name: "batch-size", Value: 256, Usage: "the workers' --batch-size"},
			&cli.StringFlag{Name: "idle-shards", Value: "1,4,16,64", Usage: "shard counts whose idle cost is measured (empty: none)"},
			&cli.DurationFlag{Name: "idle-for", Value: 5 * time.Second, Usage: "how long each idle measurement lasts"},
			&cli.StringFlag{Name: "redis-server", Value: "redis-server", Usage: "redis-server binary"},
			&cli.StringFlag{Name: "worker-bin", Usage: "timerworker binary (empty: go build one into a temporary directory)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of a table"},
			&cli.BoolFlag{Name: "quiet", Usage: "no progress lines on stderr"},
		},
		Action: func(c *cli.Context) error {
			log := stderr
			if c.Bool("quiet") {
				log = io.Discard
			}
			var idle []int
			if s := c.String("idle-shards"); s != "" {
				var err error
				if idle, err = parseInts(s); err != nil {
					return err
				}
			}
			r, err := bench.Cluster(c.Context, bench.ClusterConfig{
				Masters: c.Int("cluster"), Shards: c.Int("shards"), Timers: c.Int("timers"), Lead: c.Duration("lead"),
				Workers: c.Int("workers"), BatchSize: c.Int("batch-size"), IdleShards: idle, IdleFor: c.Duration("idle-for"),
				RedisServer: c.String("redis-server"), WorkerBin: c.String("worker-bin"), Log: log,
			})
			if err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
			return bench.Write(stdout, r, c.Bool("json"))
		},
	})
	// chaos is not part of all: it kills the Redis it runs against, so it
	// needs one of its own, with an AOF.
	cmds = append(cmds, &cli.Command{
		Name:  "chaos",
		Usage: "SIGKILL timerworkers and redis-server while timers come due; count lost, duplicate and early fires",
		Flags: append(append([]cli.Flag(nil), common...), chaos...),
		Action: func(c *cli.Context) error {
			if c.String("redis") != "" && c.Int("redis-crashes") > 0 {
				return fmt.Errorf("chaos: --redis-crashes kills the Redis, so it needs the redis-server timerbench starts itself; drop --redis")
			}
			e, err := open(c)
			if err != nil {
				return err
			}
			defer e.Close()
			r, err := e.Chaos(c.Context, bench.ChaosConfig{
				Timers: c.Int("timers"), Window: c.Duration("window"), Lead: c.Duration("lead"),
				KillEvery: c.Duration("kill-every"), RedisCrashes: c.Int("redis-crashes"),
				RedisDown: c.Duration("redis-down"), Settle: c.Duration("settle"), Shards: c.Int("shards"),
			})
			if err != nil {
				return fmt.Errorf("chaos: %w", err)
			}
			return bench.Write(stdout, r, c.Bool("json"))
		},
	})
	return &cli.App{
		Name:           "timerbench",
		Usage:          "measure timerq against a Redis it may wipe",
		Writer:         stdout,
		ErrWriter:      stderr,
		Commands:       cmds,
		ExitErrHandler: func(*cli.Context, error) {},
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--pending %q: %q is not a positive count; use e.g. 10000,1000000", s, f)
		}
		out = append(out, n)
	}
	return out, nil
}
