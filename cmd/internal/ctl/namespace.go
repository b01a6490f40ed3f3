package ctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/queue"
)

// namespaceCommand is `timerctl namespace create NS --shards N` and
// `timerctl namespace show`. It is one command with the verb as its first
// argument, not subcommands, so that flags may follow the arguments as in
// every other timerctl command.
func (r *runner) namespaceCommand() *cli.Command {
	return &cli.Command{
		Name:      "namespace",
		Usage:     "create a namespace with a shard count (create NS --shards N), show the --namespace's (show), or show or set its quotas (quotas)",
		ArgsUsage: "create NS --shards N [--replicas N [--force]] | show | quotas [--pending N] [--endpoints N] [--schedules N]",
		Flags: []cli.Flag{
			&cli.Int64Flag{Name: queue.QuotaPending, Usage: "quotas: the most pending (scheduled) timers, `N` (0 = unlimited)"},
			&cli.Int64Flag{Name: queue.QuotaEndpoints, Usage: "quotas: the most delivery endpoints, `N` (0 = unlimited)"},
			&cli.Int64Flag{Name: queue.QuotaSchedules, Usage: "quotas: the most recurring schedules, `N` (0 = unlimited)"},
			&cli.IntFlag{Name: "shards", Value: queue.DefaultShards, Usage: fmt.Sprintf("create: shard count `N`, 1-%d; fixed for the namespace's life", queue.MaxShards)},
			&cli.IntFlag{Name: "replicas", Usage: fmt.Sprintf("create: fire and acknowledge schedules only once `N` replicas have them (0-%d, 0 = off; docs/guarantees.md); may be changed later, then restart workers and applications", queue.MaxReplicas)},
			&cli.BoolFlag{Name: "force", Usage: "create: set --replicas even though a Redis master has N replicas in sync or fewer (each needs N+1, so that a failover leaves N); without it, timerctl refuses and names the masters"},
		},
		Action: func(c *cli.Context) error {
			verbs := map[string]func(*cli.Context) error{"create": r.namespaceCreate, "show": r.namespaceShow, "quotas": r.namespaceQuotas}
			if verb, ok := verbs[c.Args().First()]; ok {
				return verb(c)
			}
			return usageErr(fmt.Sprintf("namespace takes create, show or quotas, not %q", c.Args().First()),
				"run 'timerctl namespace create NS --shards N', 'timerctl namespace show' or 'timerctl namespace quotas'")
		},
	}
}

func (r *runner) namespaceCreate(c *cli.Context) error {
	if c.NArg() != 2 {
		return usageErr("namespace create takes one namespace name", "run 'timerctl namespace create NS --shards N'")
	}
	ns := c.Args().Get(1)
	if err := queue.ValidateNamespace(ns); err != nil {
		return err
	}
	shards := c.Int("shards")
	if shards < 1 || shards > queue.MaxShards {
		return usageErr(fmt.Sprintf("--shards %d is outside 1..%d", shards, queue.MaxShards), "docs/operations.md says how to choose it")
	}
	setReplicas, replicas := c.IsSet("replicas"), c.Int("replicas")
	opts := &queue.ReplicasOptions{Force: c.Bool("force")}
	return r.once(c, func(ctx context.Context, s *session) error {
		// The replicas setting is checked against the shards asked for
		// before anything is written, so that a refused one leaves no
		// namespace behind to be created again with other flags.
		if setReplicas {
			if err := queue.CheckReplicas(ctx, s.rdb, ns, shards, replicas, opts); err != nil {
				return s.redisErr(err)
			}
		}
		created, err := queue.CreateNamespace(ctx, s.rdb, ns, shards)
		if err != nil {
			return s.redisErr(err)
		}
		if setReplicas {
			if err := queue.SetReplicas(ctx, s.rdb, ns, replicas, opts); err != nil {
				return s.redisErr(err)
			}
		}
		if s.g.json {
			rep := max(replicas, 0)
			return writeJSON(r.o.Stdout, api.NamespaceJSON{Namespace: ns, Shards: shards, Replicas: &rep, Created: created})
		}
		if setReplicas {
			fmt.Fprintf(r.o.Stdout, "namespace %s: replicas set to %d\n", ns, replicas)
		}
		if created {
			fmt.Fprintf(r.o.Stdout, "created namespace %s with %s\n", ns, plural(shards, "shard"))
		} else {
			fmt.Fprintf(r.o.Stdout, "namespace %s already has %s\n", ns, plural(shards, "shard"))
		}
		return nil
	})
}

func (r *runner) namespaceShow(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("namespace show takes no namespace name", "pass it with --namespace (TIMERQ_NAMESPACE)")
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		n, err := s.q.Inspect().Shards(ctx)
		if err != nil {
			return s.redisErr(err)
		}
		rep, err := s.q.Inspect().Replicas(ctx)
		if err != nil {
			return s.redisErr(err)
		}
		if s.g.json {
			return writeJSON(r.o.Stdout, api.NamespaceJSON{Namespace: s.q.Namespace(), Shards: n, Replicas: &rep})
		}
		fmt.Fprintf(r.o.Stdout, "namespace %s has %s", s.q.Namespace(), plural(n, "shard"))
		if rep > 0 {
			fmt.Fprintf(r.o.Stdout, "; a fire or schedule waits for %s", plural(rep, "replica"))
		}
		fmt.Fprintln(r.o.Stdout)
		return nil
	})
}

// namespaceQuotas prints the --namespace's quotas, after setting those
// given as flags (the others keep their values).
func (r *runner) namespaceQuotas(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("namespace quotas takes no namespace name", "pass it with --namespace (TIMERQ_NAMESPACE)")
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		ns := s.q.Namespace()
		q, err := queue.NamespaceQuotas(ctx, s.rdb, ns)
		if err != nil {
			return s.redisErr(err)
		}
		set := false
		for _, f := range []struct {
			name string
			v    *int64
		}{{queue.QuotaPending, &q.Pending}, {queue.QuotaEndpoints, &q.Endpoints}, {queue.QuotaSchedules, &q.Schedules}} {
			if c.IsSet(f.name) {
				*f.v, set = c.Int64(f.name), true
			}
		}
		if set {
			if err := queue.ValidateQuotas(q); err != nil {
				return usageErr(strings.TrimPrefix(err.Error(), "timerq: invalid options: "), "give a count, or 0 for unlimited")
			}
			if err := queue.SetQuotas(ctx, s.rdb, ns, q); err != nil {
				return s.redisErr(err)
			}
		}
		if s.g.json {
			return writeJSON(r.o.Stdout, q)
		}
		tw := newTable(r.o.Stdout)
		for _, f := range []struct {
			name string
			v    int64
		}{{queue.QuotaPending, q.Pending}, {queue.QuotaEndpoints, q.Endpoints}, {queue.QuotaSchedules, q.Schedules}} {
			if f.v == 0 {
				fmt.Fprintf(tw, "%s\tunlimited\n", f.name)
			} else {
				fmt.Fprintf(tw, "%s\t%d\n", f.name, f.v)
			}
		}
		return tw.Flush()
	})
}

// plural is "1 shard", "2 shards".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
