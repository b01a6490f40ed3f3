package ctl

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/queue"
)

// flowCommand is `timerctl flow put|list|delete|stats`: per-key flow
// control of delivery (docs/delivery.md#flow-control).
func (r *runner) flowCommand() *cli.Command {
	return &cli.Command{
		Name:      "flow",
		Usage:     "manage per-key flow control of delivery (put --rate N --per D [--key K] [--endpoint E] [--max-in-flight M] | list | delete [--key K] [--endpoint E] | stats [--group G])",
		ArgsUsage: "put --rate N --per D [flags] | list | delete [flags] | stats [--group G]",
		Description: `put creates or replaces the flow policy of --endpoint (none: the namespace's) and --key
(none: the default for keys without a policy of their own): at most --rate deliveries of one
key per --per, paced, and at most --max-in-flight under way at once (0: no bound). stats
lists the flow keys of a consumer group with fires parked: backlog, in flight and rate.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "endpoint", Usage: "put, delete: the policy's endpoint `NAME` (none: the namespace's policy)"},
			&cli.StringFlag{Name: "key", Usage: "put, delete: the policy's flow `KEY` (none: the default)"},
			&cli.IntFlag{Name: "rate", Usage: "put: deliveries of one key per --per, `N`"},
			&cli.DurationFlag{Name: "per", Usage: "put: the rate's period `D` (1ms-24h)", Value: time.Second},
			&cli.IntFlag{Name: "max-in-flight", Usage: "put: deliveries of one key under way at once, `M` (0: no bound)"},
			&cli.StringFlag{Name: "group", Usage: "stats: the consumer `GROUP`", Value: "timerq-deliver"},
			&cli.IntFlag{Name: "limit", Usage: "stats: most keys to list, the largest backlog first, `N`", Value: 20},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("flow takes one verb: put, list, delete or stats", "run 'timerctl flow --help'")
			}
			verbs := map[string]func(*cli.Context) error{"put": r.flowPut, "list": r.flowList, "delete": r.flowDelete, "stats": r.flowStats}
			if verb, ok := verbs[c.Args().First()]; ok {
				return verb(c)
			}
			return usageErr(fmt.Sprintf("flow takes put, list, delete or stats, not %q", c.Args().First()), "run 'timerctl flow --help'")
		},
	}
}

func (r *runner) flowPut(c *cli.Context) error {
	p := queue.FlowPolicy{Endpoint: c.String("endpoint"), Key: c.String("key"), Rate: c.Int("rate"), Period: c.Duration("per"),
		MaxInFlight: c.Int("max-in-flight")}
	// Refused before connecting: nothing is written.
	if err := queue.ValidateFlowPolicy(p); err != nil {
		return err
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		if err := s.q.Flows().PutPolicy(ctx, p); err != nil {
			return s.redisErr(err)
		}
		if s.g.json {
			return writeJSON(r.o.Stdout, api.ToFlowPolicyJSON(p))
		}
		fmt.Fprintf(r.o.Stdout, "flow policy %s: %s\n", policyName(p.Endpoint, p.Key), policyText(p))
		return nil
	})
}

func policyName(endpoint, key string) string {
	scope := "namespace"
	if endpoint != "" {
		scope = "endpoint " + endpoint
	}
	if key == "" {
		return scope + ", default"
	}
	return fmt.Sprintf("%s, key %q", scope, key)
}

func policyText(p queue.FlowPolicy) string {
	s := fmt.Sprintf("%d per %v", p.Rate, p.Period)
	if p.MaxInFlight > 0 {
		s += fmt.Sprintf(", at most %d in flight", p.MaxInFlight)
	}
	return s
}

func (r *runner) flowList(c *cli.Context) error {
	return r.once(c, func(ctx context.Context, s *session) error {
		list, err := s.q.Flows().Policies(ctx)
		if err != nil {
			return s.redisErr(err)
		}
		if s.g.json {
			return writeJSON(r.o.Stdout, map[string]any{"flow_policies": mapList(list, api.ToFlowPolicyJSON)})
		}
		if len(list) == 0 {
			fmt.Fprintf(r.o.Stdout, "no flow policies in namespace %s\n", s.q.Namespace())
			return nil
		}
		tw := newTable(r.o.Stdout)
		fmt.Fprintln(tw, "ENDPOINT\tKEY\tRATE\tMAX IN FLIGHT")
		for _, p := range list {
			fmt.Fprintf(tw, "%s\t%s\t%d/%v\t%s\n", orDash(p.Endpoint), orDefault(p.Key), p.Rate, p.Period, inFlightText(p.MaxInFlight))
		}
		return tw.Flush()
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orDefault(s string) string {
	if s == "" {
		return "(default)"
	}
	return s
}

func inFlightText(n int) string {
	if n == 0 {
		return "unbounded"
	}
	return fmt.Sprint(n)
}

func (r *runner) flowDelete(c *cli.Context) error {
	endpoint, key := c.String("endpoint"), c.String("key")
	return r.once(c, func(ctx context.Context, s *session) error {
		found, err := s.q.Flows().DeletePolicy(ctx, endpoint, key)
		if err != nil {
			return s.redisErr(err)
		}
		if !found {
			return &Error{Code: ExitNotFound, Problem: fmt.Sprintf("no flow policy for %s", policyName(endpoint, key)), Fix: "list them with 'timerctl flow list'"}
		}
		if s.g.json {
			return writeJSON(r.o.Stdout, map[string]any{"endpoint": endpoint, "key": key, "deleted": true})
		}
		fmt.Fprintf(r.o.Stdout, "deleted flow policy %s\n", policyName(endpoint, key))
		return nil
	})
}

func (r *runner) flowStats(c *cli.Context) error {
	group, limit := c.String("group"), c.Int("limit")
	if err := queue.ValidateConsumerName("group", group); err != nil {
		return err
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		st, err := s.q.Flows().Stats(ctx, group, limit)
		if err != nil {
			return s.redisErr(err)
		}
		if s.g.json {
			return writeJSON(r.o.Stdout, struct {
				Group string             `json:"group"`
				Flows []api.FlowStatJSON `json:"flows"`
			}{group, mapList(st, api.ToFlowStatJSON)})
		}
		if len(st) == 0 {
			fmt.Fprintf(r.o.Stdout, "no flow key of group %s has fires parked\n", group)
			return nil
		}
		tw := newTable(r.o.Stdout)
		fmt.Fprintln(tw, "ENDPOINT\tKEY\tBACKLOG\tIN FLIGHT\tRATE")
		for _, f := range st {
			rate := "-"
			if f.Policy.Rate > 0 {
				rate = policyText(f.Policy)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", orDash(f.Endpoint), f.Key, f.Backlog, f.InFlight, rate)
		}
		return tw.Flush()
	})
}
