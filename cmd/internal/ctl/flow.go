package ctl

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/queue"
)

// flowCommand is `timerctl flow put|list|delete|stats`: per-key flow
// control of delivery (docs/delivery.md#flow-control).
func (r *runner) flowCommand() *cli.Command {
	return verbCommand(&cli.Command{
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
	},
		verb{name: "put", fix: "run 'timerctl flow --help'", run: r.flowPut}, verb{name: "list", fix: "run 'timerctl flow --help'", run: r.flowList},
		verb{name: "delete", fix: "run 'timerctl flow --help'", run: r.flowDelete}, verb{name: "stats", fix: "run 'timerctl flow --help'", run: r.flowStats})
}

func (r *runner) flowPut(c *cli.Context, _ []string) error {
	p := queue.FlowPolicy{Endpoint: c.String("endpoint"), Key: c.String("key"), Rate: c.Int("rate"), Period: c.Duration("per"),
		MaxInFlight: c.Int("max-in-flight")}
	// Refused before connecting: nothing is written.
	if err := queue.ValidateFlowPolicy(p); err != nil {
		return err
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		if err := s.q.Flows().PutPolicy(ctx, p); err != nil {
			return err
		}
		return r.emitf(s.g, api.ToFlowPolicyJSON(p), "flow policy %s: %s\n", policyName(p.Endpoint, p.Key), policyText(p))
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

func (r *runner) flowList(c *cli.Context, _ []string) error {
	return show(r, c, func(ctx context.Context, s *session) ([]queue.FlowPolicy, error) { return s.q.Flows().Policies(ctx) },
		func(s *session, list []queue.FlowPolicy) error {
			return r.emit(s.g, map[string]any{"flow_policies": mapList(list, api.ToFlowPolicyJSON)}, func(w io.Writer) error {
				return writeRows(w, "no flow policies in namespace "+s.q.Namespace(), "ENDPOINT\tKEY\tRATE\tMAX IN FLIGHT", list, func(p queue.FlowPolicy) string {
					return fmt.Sprintf("%s\t%s\t%d/%v\t%s", cmp.Or(p.Endpoint, "-"), cmp.Or(p.Key, "(default)"), p.Rate, p.Period, inFlightText(p.MaxInFlight))
				})
			})
		})
}

func inFlightText(n int) string {
	if n == 0 {
		return "unbounded"
	}
	return fmt.Sprint(n)
}

func (r *runner) flowDelete(c *cli.Context, _ []string) error {
	endpoint, key := c.String("endpoint"), c.String("key")
	return r.once(c, func(ctx context.Context, s *session) error {
		found, err := s.q.Flows().DeletePolicy(ctx, endpoint, key)
		if err != nil {
			return err
		}
		if !found {
			return &Error{Code: ExitNotFound, Problem: fmt.Sprintf("no flow policy for %s", policyName(endpoint, key)), Fix: "list them with 'timerctl flow list'"}
		}
		return r.emitf(s.g, map[string]any{"endpoint": endpoint, "key": key, "deleted": true}, "deleted flow policy %s\n", policyName(endpoint, key))
	})
}

func (r *runner) flowStats(c *cli.Context, _ []string) error {
	group, limit := c.String("group"), c.Int("limit")
	if err := queue.ValidateConsumerName("group", group); err != nil {
		return err
	}
	return show(r, c, func(ctx context.Context, s *session) ([]queue.FlowStat, error) {
		return s.q.Flows().Stats(ctx, group, limit)
	},
		func(s *session, st []queue.FlowStat) error {
			return r.emit(s.g, struct {
				Group string             `json:"group"`
				Flows []api.FlowStatJSON `json:"flows"`
			}{group, mapList(st, api.ToFlowStatJSON)}, func(w io.Writer) error {
				return writeRows(w, "no flow key of group "+group+" has fires parked", "ENDPOINT\tKEY\tBACKLOG\tIN FLIGHT\tRATE", st, func(f queue.FlowStat) string {
					rate := "-"
					if f.Policy.Rate > 0 {
						rate = policyText(f.Policy)
					}
					return fmt.Sprintf("%s\t%s\t%d\t%d\t%s", cmp.Or(f.Endpoint, "-"), f.Key, f.Backlog, f.InFlight, rate)
				})
			})
		})
}
