package ctl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/queue"
)

// cancelCommand is "timerctl cancel": one timer by ID, or, with --prefix,
// --owner or --label, every timer they select (queue.CancelMatching).
func (r *runner) cancelCommand() *cli.Command {
	return &cli.Command{
		Name: "cancel", Usage: "cancel a scheduled timer (a cancelled one is left as it is), or every timer of an ID prefix, an owner or labels",
		ArgsUsage: "ID | [--prefix P] [--owner OWNER] [--label KEY=VALUE]...",
		Description: `With --prefix P, cancels every scheduled timer whose ID starts with P (byte for byte:
glob characters are not special), on every shard, and prints the bulk cancel job: how many
it cancelled, and how many had fired or been cancelled before it reached them. --owner
selects an owner's timers (through the owner index), --label KEY=VALUE (repeatable) the
timers carrying every label given; a timer is selected when it matches every flag given.
Each timer ends cancelled or fired, never both. Up to 10,000 selected timers the job ends
in the call; a larger one is finished by the workers (timerworker): follow it with
'timerctl cancel-jobs get JOB'. An empty filter is refused: there is no cancel of every timer.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prefix", Usage: "cancel every timer whose ID starts with `P`"},
			ownerFlag("cancel every timer of `OWNER`"),
			labelFlag("cancel every timer with the label `KEY=VALUE` (repeat for more: all must match)"),
		},
		Action: r.cancel,
	}
}

func (r *runner) cancel(c *cli.Context) error {
	if !c.IsSet("prefix") && !c.IsSet("owner") && !c.IsSet("label") {
		return r.byID(c, func(ctx context.Context, q *queue.Queue, id string) (queue.Timer, error) { return q.Cancel(ctx, id) })
	}
	if c.NArg() > 0 {
		return usageErr(fmt.Sprintf("cancel takes an ID or a filter (--prefix, --owner, --label), not both: %q", c.Args().Slice()), helpFix(c))
	}
	f := queue.CancelFilter{IDPrefix: c.String("prefix")}
	if c.IsSet("prefix") && f.IDPrefix == "" {
		// Beside --owner or --label it would select every ID.
		return usageErr("--prefix is empty", "give the prefix the timers' IDs start with, or leave --prefix out")
	}
	var err error
	if f.Owner, err = ownerOf(c); err != nil {
		return err
	}
	if f.Labels, err = labelsOf(c); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return usageErr(strings.TrimPrefix(err.Error(), "timerq: "), helpFix(c))
	}
	return show(r, c, func(ctx context.Context, s *session) (queue.CancelJob, error) { return s.q.CancelMatching(ctx, f) }, r.cancelJobOut)
}

// cancelJobsCommand is "timerctl cancel-jobs": the bulk cancel jobs.
func (r *runner) cancelJobsCommand() *cli.Command {
	return &cli.Command{
		Name:  "cancel-jobs",
		Usage: "the bulk cancel jobs (timerctl cancel --prefix, --owner, --label), kept for the retention after they end",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list the jobs, newest first (at most 100)", ArgsUsage: " ", Action: noArgs(r.cancelJobsList)},
			{Name: "get", Usage: "print one job, with its progress while it runs", ArgsUsage: "JOB", Action: r.cancelJobsGet},
		},
	}
}

func (r *runner) cancelJobsList(c *cli.Context) error {
	return show(r, c, func(ctx context.Context, s *session) ([]queue.CancelJob, error) { return s.q.CancelJobs().List(ctx) },
		func(s *session, jobs []queue.CancelJob) error {
			return r.emit(s.g, mapList(jobs, api.ToCancelJobJSON), func(w io.Writer) error {
				return writeRows(w, "no bulk cancel jobs", "JOB\tSTATE\tFILTER\tCANCELLED\tFIRED BEFORE\tCANCELLED BEFORE\tSHARDS DONE\tCREATED", jobs, func(j queue.CancelJob) string {
					return fmt.Sprintf("%s\t%s\t%s\t%d\t%d\t%d\t%d/%d\t%s", j.ID, j.State, j.Filter.String(),
						j.Counts.Cancelled, j.Counts.Fired, j.Counts.AlreadyCancelled, j.ShardsDone, j.Shards, fmtTime(j.Created, r.o.Now()))
				})
			})
		})
}

func (r *runner) cancelJobsGet(c *cli.Context) error {
	id, err := oneArg(c, "the job ID")
	if err != nil {
		return err
	}
	return show(r, c, func(ctx context.Context, s *session) (queue.CancelJob, error) { return s.q.CancelJobs().Get(ctx, id) }, r.cancelJobOut)
}

// cancelJobOut prints one job: JSON as the API answers it, or a table.
func (r *runner) cancelJobOut(s *session, j queue.CancelJob) error {
	return r.emit(s.g, api.ToCancelJobJSON(j), func(w io.Writer) error { return writeCancelJob(w, j, r.o.Now()) })
}

// writeCancelJob prints one job as a two-column table.
func writeCancelJob(w io.Writer, j queue.CancelJob, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "job\t%s\n", j.ID)
	if j.Filter.IDPrefix != "" {
		fmt.Fprintf(tw, "prefix\t%s\n", strconv.Quote(j.Filter.IDPrefix))
	}
	if j.Filter.Owner != "" {
		fmt.Fprintf(tw, "owner\t%s\n", strconv.Quote(j.Filter.Owner))
	}
	if len(j.Filter.Labels) > 0 {
		fmt.Fprintf(tw, "labels\t%s\n", fmtLabels(j.Filter.Labels))
	}
	if j.Filter.EpochBelow != 0 {
		fmt.Fprintf(tw, "epoch below\t%d\n", j.Filter.EpochBelow)
	}
	fmt.Fprintf(tw, "state\t%s\n", j.State)
	if j.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", j.Error)
	}
	fmt.Fprintf(tw, "created\t%s\n", fmtTime(j.Created, now))
	fmt.Fprintf(tw, "finished\t%s\n", fmtTime(j.Finished, now))
	fmt.Fprintf(tw, "cancelled\t%d\n", j.Counts.Cancelled)
	fmt.Fprintf(tw, "fired before\t%d\n", j.Counts.Fired)
	fmt.Fprintf(tw, "cancelled before\t%d\n", j.Counts.AlreadyCancelled)
	if j.Counts.Skipped > 0 {
		fmt.Fprintf(tw, "skipped (malformed)\t%d\n", j.Counts.Skipped)
	}
	fmt.Fprintf(tw, "shards done\t%d of %d\n", j.ShardsDone, j.Shards)
	return tw.Flush()
}
