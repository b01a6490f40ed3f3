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
	"strings"
	"syscall"

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
	output := []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object per scenario instead of a table"},
		&cli.BoolFlag{Name: "quiet", Usage: "no progress lines on stderr"},
	}
	common := append(bench.Flags(&bench.Config{}), output...)
	scenarios := []scenario{
		newScenario("burst", "N timers due at one instant, fired by --workers timerworkers; also runs ceiling for ceiling_ratio", (*bench.Env).Burst),
		newScenario("steady", "a constant rate of timers coming due: lateness and wake percentiles; with --deliver each also delivered to a webhook sink", (*bench.Env).Steady),
		newScenario("ceiling", "claim.lua back to back from one connection, no worker logic", (*bench.Env).Ceiling),
		newScenario("memory", "Redis bytes per pending timer, and per member of a bare sorted set", (*bench.Env).Memory),
		newScenario("scale", "claim throughput with 10k, 1M and 10M timers pending", (*bench.Env).Scale),
		newScenario("recurring", "interval schedules fired by --workers timerworkers: occurrences/s, lateness, memory", (*bench.Env).Recurring),
		newScenario("waiters", "many concurrent Wait calls in one process: connections, heap, latency", (*bench.Env).Waiters),
		newScenario("api", "the HTTP API on an API-only timerworker beside the Go API: creates, batches, long polls, open waits, pull-consume", (*bench.Env).API),
	}
	// chaos is not part of all: it kills the Redis it runs against, so it
	// needs one of its own, with an AOF.
	chaos := newScenario("chaos", "SIGKILL timerworkers and redis-server while timers come due; count lost, duplicate and early fires", (*bench.Env).Chaos)
	chaos.flags = append(chaos.flags, &cli.StringFlag{Name: "appendfsync", Value: "always",
		Usage: "chaos: the private redis-server's AOF policy: always, everysec, no, or off (no AOF)"})
	logTo := func(c *cli.Context) io.Writer {
		if c.Bool("quiet") {
			return io.Discard
		}
		return stderr
	}
	// run opens the bench environment and prints each scenario's result.
	run := func(ss ...scenario) cli.ActionFunc {
		return func(c *cli.Context) error {
			var cfg bench.Config
			if err := bench.FromFlags(c, &cfg); err != nil {
				return err
			}
			cfg.Log, cfg.AppendFsync = logTo(c), c.String("appendfsync")
			e, err := bench.Open(c.Context, cfg)
			if err != nil {
				return err
			}
			defer e.Close()
			for _, s := range ss {
				r, err := s.run(c, e)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				if err := bench.Write(stdout, r, c.Bool("json")); err != nil {
					return err
				}
			}
			return nil
		}
	}
	var cmds []*cli.Command
	var allFlags []cli.Flag
	for _, s := range append(scenarios, chaos) {
		if s.name != "chaos" {
			allFlags = append(allFlags, s.flags...)
		}
		cmds = append(cmds, &cli.Command{Name: s.name, Usage: s.usage, Flags: append(common[:len(common):len(common)], s.flags...), Action: run(s)})
	}
	cmds = append(cmds, &cli.Command{Name: "all", Usage: "every scenario in turn, with their flags",
		Flags: append(common[:len(common):len(common)], allFlags...), Action: run(scenarios...)})
	// cluster starts its own Cluster, so it takes none of the --redis flags.
	cmds = append(cmds, &cli.Command{
		Name:  "cluster",
		Usage: "start a 1- or 3-master Redis Cluster: a burst over a sharded namespace (fires/s, lateness, Redis CPU per fire and share of fires per master), then a worker's idle cost as the shard count grows",
		Flags: append(bench.Flags(&bench.ClusterConfig{}), output...),
		Action: func(c *cli.Context) error {
			cfg := bench.ClusterConfig{Log: logTo(c)}
			if err := bench.FromFlags(c, &cfg); err != nil {
				return err
			}
			r, err := bench.Cluster(c.Context, cfg)
			if err != nil {
				return fmt.Errorf("cluster: %w", err)
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

// scenario is one subcommand run on an open bench environment.
type scenario struct {
	name, usage string
	flags       []cli.Flag
	run         func(*cli.Context, *bench.Env) (any, error)
}

// newScenario makes the subcommand of a scenario method, its flags those
// of its configuration.
func newScenario[C, R any](name, usage string, run func(*bench.Env, context.Context, C) (R, error)) scenario {
	var flags C
	return scenario{name, usage, bench.Flags(&flags), func(c *cli.Context, e *bench.Env) (any, error) {
		var cfg C
		if err := bench.FromFlags(c, &cfg); err != nil {
			return nil, err
		}
		return run(e, c.Context, cfg)
	}}
}
