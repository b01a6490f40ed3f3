package ctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/queue"
)

// redriveCommand is "timerctl redrive": deliver dead-lettered deliveries
// again, one by its ID or all of an endpoint's (queue.Deliveries.Redrive).
func (r *runner) redriveCommand() *cli.Command {
	return &cli.Command{
		Name:      "redrive",
		Usage:     "deliver dead-lettered deliveries to endpoints again: one, or all of an endpoint's",
		ArgsUsage: "(SHARD/DEAD_ID | --endpoint NAME | --all) [--group G] [--dry-run]",
		Description: `Requeues dead letters of the delivery group onto the fire stream; a running
timerworker --deliver delivers them again, each with a fresh set of attempts
and its old webhook-id. SHARD/DEAD_ID names one (the shard, 0 in a namespace
of one, and the dead letter's ID, as the dashboard and the API show them).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "endpoint", Usage: "every dead-lettered delivery to endpoint `NAME`"},
			&cli.BoolFlag{Name: "all", Usage: "every dead-lettered delivery, to any endpoint"},
			&cli.StringFlag{Name: "group", Value: queue.DefaultDeliveryGroup, Usage: "the delivering replicas' consumer `GROUP` (timerworker --deliver-group)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be redriven, change nothing"},
		},
		Action: r.redrive,
	}
}

func (r *runner) redrive(c *cli.Context) error {
	ep, all := c.String("endpoint"), c.Bool("all")
	one := c.Args().First()
	switch {
	case c.NArg() > 1:
		return usageErr(fmt.Sprintf("too many arguments: %q", c.Args().Slice()), helpFix(c))
	case (one != "") == (ep != "" || all) || ep != "" && all:
		return usageErr("give one of SHARD/DEAD_ID, --endpoint NAME or --all", "e.g. timerctl redrive --endpoint billing --dry-run")
	}
	var shard int
	var deadID string
	if one != "" {
		s, id, ok := strings.Cut(one, "/")
		n, err := strconv.Atoi(s)
		if !ok || err != nil || n < 0 {
			return usageErr(fmt.Sprintf("%q is not SHARD/DEAD_ID", one), "give the shard and the dead letter's ID, e.g. 0/1700000000000-0")
		}
		shard, deadID = n, id
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		if one != "" {
			if c.Bool("dry-run") {
				_, err := fmt.Fprintf(r.o.Stdout, "would redrive %d/%s\n", shard, deadID)
				return err
			}
			id, err := s.q.Deliveries().Requeue(ctx, shard, deadID)
			if errors.Is(err, queue.ErrDeadLetterNotFound) {
				return &Error{Code: ExitNotFound, Problem: fmt.Sprintf("no dead letter %s in shard %d", deadID, shard),
					Fix: "list them on the dashboard's group page or GET .../groups/GROUP/dead-letters; a redriven one is gone from there", Err: err}
			}
			if err != nil {
				return s.redisErr(err)
			}
			_, err = fmt.Fprintf(r.o.Stdout, "redriven %d/%s as fire %s\n", shard, deadID, id)
			return err
		}
		done, err := s.q.Deliveries().Redrive(ctx, c.String("group"), &queue.RedriveOptions{Endpoint: ep, DryRun: c.Bool("dry-run")})
		if err != nil && len(done) == 0 {
			return s.redisErr(err)
		}
		owned := slices.ContainsFunc(done, func(d queue.Redriven) bool { return d.Event.Owner != "" })
		tw := newTable(r.o.Stdout)
		fmt.Fprint(tw, "DEAD LETTER\tTIMER\t")
		if owned {
			fmt.Fprint(tw, ownerHeads)
		}
		fmt.Fprintln(tw, "ENDPOINT\tERROR")
		for _, d := range done {
			fmt.Fprintf(tw, "%d/%s\t%s\t", d.Event.Shard, d.Event.StreamID, d.Event.ID)
			if owned {
				fmt.Fprint(tw, ownerCells(d.Event.Owner, d.Event.Epoch))
			}
			fmt.Fprintf(tw, "%s\t%s\n", d.Event.Endpoint, d.Error)
		}
		verb := "redriven"
		if c.Bool("dry-run") {
			verb = "would be redriven"
		}
		fmt.Fprintf(tw, "%d %s\n", len(done), verb)
		if ferr := tw.Flush(); ferr != nil {
			return ferr
		}
		if err != nil {
			return s.redisErr(err)
		}
		return nil
	})
}
