package ctl

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/queue"
)

// namespaceCommand is `timerctl namespace create|show|quotas|upgrade`.
func (r *runner) namespaceCommand() *cli.Command {
	return verbCommand(&cli.Command{
		Name:      "namespace",
		Usage:     "create a namespace with a shard count (create NS --shards N), show the --namespace's (show), show or set its quotas (quotas), or move it to layout 2 of its keys once every process runs this release or later (upgrade)",
		ArgsUsage: "create NS --shards N [--replicas N [--force]] | show | quotas [--pending N] [--endpoints N] [--schedules N] | upgrade",
		Flags: []cli.Flag{
			&cli.Int64Flag{Name: queue.QuotaPending, Usage: "quotas: the most pending (scheduled) timers, `N` (0 = unlimited)"},
			&cli.Int64Flag{Name: queue.QuotaEndpoints, Usage: "quotas: the most delivery endpoints, `N` (0 = unlimited)"},
			&cli.Int64Flag{Name: queue.QuotaSchedules, Usage: "quotas: the most recurring schedules, `N` (0 = unlimited)"},
			&cli.IntFlag{Name: "shards", Value: queue.DefaultShards, Usage: fmt.Sprintf("create: shard count `N`, 1-%d; fixed for the namespace's life", queue.MaxShards)},
			&cli.IntFlag{Name: "replicas", Usage: fmt.Sprintf("create: fire and acknowledge schedules only once `N` replicas have them (0-%d, 0 = off; docs/guarantees.md); may be changed later, then restart workers and applications", queue.MaxReplicas)},
			&cli.BoolFlag{Name: "force", Usage: "create: set --replicas even though a Redis master has N replicas in sync or fewer (each needs N+1, so that a failover leaves N); without it, timerctl refuses and names the masters"},
		},
	},
		verb{name: "create", arg: "namespace name", fix: "run 'timerctl namespace create NS --shards N'", run: r.namespaceCreate},
		verb{name: "show", fix: "pass the namespace with --namespace (TIMERQ_NAMESPACE)", run: r.namespaceShow},
		verb{name: "quotas", fix: "pass the namespace with --namespace (TIMERQ_NAMESPACE)", run: r.namespaceQuotas},
		verb{name: "upgrade", fix: "pass the namespace with --namespace (TIMERQ_NAMESPACE)", run: r.namespaceUpgrade})
}

// namespaceUpgrade moves the --namespace to layout 2 of its keys
// (queue.Engine.UpgradeLayout), step by step, and prints where it stands.
func (r *runner) namespaceUpgrade(c *cli.Context, _ []string) error {
	return r.once(c, func(ctx context.Context, s *session) error {
		var st queue.LayoutStatus
		for {
			var err error
			if st, err = s.q.Engine().UpgradeLayout(ctx, queue.MaxBatch); err != nil {
				return err
			}
			if st.Done() {
				break
			}
		}
		return r.emit(s.g, st, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "namespace %s: %s at layout 2\n", s.q.Namespace(), plural(st.Shards, "shard"))
			return err
		})
	})
}

func (r *runner) namespaceCreate(c *cli.Context, args []string) error {
	ns := args[0]
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
				return err
			}
		}
		created, err := queue.CreateNamespace(ctx, s.rdb, ns, shards)
		if err != nil {
			return err
		}
		if setReplicas {
			if err := queue.SetReplicas(ctx, s.rdb, ns, replicas, opts); err != nil {
				return err
			}
		}
		rep := max(replicas, 0)
		return r.emit(s.g, api.NamespaceJSON{Namespace: ns, Shards: shards, Replicas: &rep, Created: created}, func(w io.Writer) error {
			if setReplicas {
				fmt.Fprintf(w, "namespace %s: replicas set to %d\n", ns, replicas)
			}
			if created {
				fmt.Fprintf(w, "created namespace %s with %s\n", ns, plural(shards, "shard"))
			} else {
				fmt.Fprintf(w, "namespace %s already has %s\n", ns, plural(shards, "shard"))
			}
			return nil
		})
	})
}

func (r *runner) namespaceShow(c *cli.Context, _ []string) error {
	return r.once(c, func(ctx context.Context, s *session) error {
		n, err := s.q.Inspect().Shards(ctx)
		if err != nil {
			return err
		}
		rep, err := s.q.Inspect().Replicas(ctx)
		if err != nil {
			return err
		}
		return r.emit(s.g, api.NamespaceJSON{Namespace: s.q.Namespace(), Shards: n, Replicas: &rep}, func(w io.Writer) error {
			fmt.Fprintf(w, "namespace %s has %s", s.q.Namespace(), plural(n, "shard"))
			if rep > 0 {
				fmt.Fprintf(w, "; a fire or schedule waits for %s", plural(rep, "replica"))
			}
			_, err := fmt.Fprintln(w)
			return err
		})
	})
}

// namespaceQuotas prints the --namespace's quotas, after setting those
// given as flags (the others keep their values).
func (r *runner) namespaceQuotas(c *cli.Context, _ []string) error {
	return r.once(c, func(ctx context.Context, s *session) error {
		ns := s.q.Namespace()
		q, err := queue.NamespaceQuotas(ctx, s.rdb, ns)
		if err != nil {
			return err
		}
		quotas := []struct {
			name string
			v    *int64
		}{{queue.QuotaPending, &q.Pending}, {queue.QuotaEndpoints, &q.Endpoints}, {queue.QuotaSchedules, &q.Schedules}}
		set := false
		for _, f := range quotas {
			if c.IsSet(f.name) {
				*f.v, set = c.Int64(f.name), true
			}
		}
		if set {
			if err := queue.ValidateQuotas(q); err != nil {
				return usageErr(strings.TrimPrefix(err.Error(), "timerq: invalid options: "), "give a count, or 0 for unlimited")
			}
			if err := queue.SetQuotas(ctx, s.rdb, ns, q); err != nil {
				return err
			}
		}
		return r.emit(s.g, q, func(w io.Writer) error {
			tw := newTable(w)
			for _, f := range quotas {
				if *f.v == 0 {
					fmt.Fprintf(tw, "%s\tunlimited\n", f.name)
				} else {
					fmt.Fprintf(tw, "%s\t%d\n", f.name, *f.v)
				}
			}
			return tw.Flush()
		})
	})
}

// plural is "1 shard", "2 shards".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
