package ctl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/queue"
)

// Owners, labels, fencing epochs and fire deadlines on the command line:
// the flags of schedule, list and cancel, and the owner command.

// ownerFlag and labelFlag select or set a timer's owner and labels; each
// command gives its own usage.
func ownerFlag(usage string) cli.Flag { return &cli.StringFlag{Name: "owner", Usage: usage} }

func labelFlag(usage string) cli.Flag { return cliconf.MultiFlag("label", usage) }

// ownerOf reads --owner, checked before connecting; "" when not given.
func ownerOf(c *cli.Context) (string, error) {
	if !c.IsSet("owner") {
		return "", nil
	}
	owner := c.String("owner")
	if err := queue.ValidateOwner(owner); err != nil {
		return "", flagErr("--owner", err)
	}
	return owner, nil
}

// labelsOf reads the --label KEY=VALUE flags, each one label taken whole
// (a comma is part of the value), checked before connecting; nil when none
// is given.
func labelsOf(c *cli.Context) (map[string]string, error) {
	var out map[string]string
	for _, kv := range cliconf.MultiValues(c, "label") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageErr(fmt.Sprintf("--label %q is not KEY=VALUE", kv), "give one label a flag, e.g. --label tenant=acme --label kind=sla")
		}
		if old, dup := out[k]; dup && old != v {
			return nil, usageErr(fmt.Sprintf("--label %s is given twice, as %q and %q", k, old, v), "a timer has one value a key: give each key once")
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	if err := queue.ValidateLabels(out); err != nil {
		return nil, flagErr("--label", err)
	}
	return out, nil
}

// newTimerMeta sets t's owner, labels, epoch and deadline from schedule's
// --owner, --label, --epoch and --fire-within.
func newTimerMeta(c *cli.Context, t *queue.NewTimer) error {
	var err error
	if t.Owner, err = ownerOf(c); err != nil {
		return err
	}
	if t.Labels, err = labelsOf(c); err != nil {
		return err
	}
	if c.IsSet("epoch") {
		if t.Owner == "" {
			return usageErr("--epoch needs --owner", "an epoch is an owner's: give --owner OWNER --epoch N, N as 'timerctl owner bump OWNER' printed it")
		}
		t.Epoch = c.Uint64("epoch")
	}
	if c.IsSet("fire-within") {
		d, err := parseIn("fire-within", c.String("fire-within"))
		if err != nil {
			return err
		}
		if d <= 0 {
			return usageErr(fmt.Sprintf("--fire-within %q is not positive", c.String("fire-within")),
				"give how long after its due time the fire may still be delivered, e.g. --fire-within 10m, or leave it out for no deadline")
		}
		t.FireWithin = d
	}
	return nil
}

// ownerCommand is `timerctl owner get|bump OWNER`: an owner's fencing
// epoch and next wake (the API's GET .../owners/{owner}), and the bump of
// its epoch (POST .../owners/{owner}/epoch).
func (r *runner) ownerCommand() *cli.Command {
	return verbCommand(&cli.Command{
		Name:      "owner",
		Usage:     "an owner's fencing epoch and next wake, and the bump of its epoch (get OWNER | bump OWNER [--cancel-older])",
		ArgsUsage: "get OWNER | bump OWNER [--cancel-older]",
		Description: `An owner (a workflow's ID, say) owns the timers scheduled with --owner. Its fencing
epoch is 0 until first bumped; each timer records the epoch it was scheduled under,
and its fire carries it. get prints the epoch, how many of its timers are scheduled
and the earliest due time among them. bump raises the epoch by one and prints it:
the executor that takes the owner over bumps, schedules under the new epoch
(schedule --owner OWNER --epoch N, refused with exit code 4 once another executor
bumped again), and ignores fires of a lower epoch. With --cancel-older it also
cancels the owner's scheduled timers of older epochs, as a bulk cancel, and prints
the job.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "cancel-older", Usage: "bump: also cancel the owner's timers scheduled under an older epoch"},
		},
	},
		verb{name: "get", arg: "owner", fix: "run 'timerctl owner get OWNER'", run: r.ownerGet},
		verb{name: "bump", arg: "owner", fix: "run 'timerctl owner bump OWNER [--cancel-older]'", run: r.ownerBump})
}

// checkOwner refuses an owner argument queue would, before connecting.
func checkOwner(owner string) error {
	if err := queue.ValidateOwner(owner); err != nil {
		return flagErr("OWNER", err)
	}
	return nil
}

// flagErr is the usage error of a value queue refused (err, which wraps
// ErrInvalidOptions), given as what: queue's reason, then its fix.
func flagErr(what string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "timerq: invalid options: ")
	problem, fix, ok := strings.Cut(msg, "; ")
	if !ok {
		fix = "see 'timerctl --help'"
	}
	return usageErr(what+": "+problem, fix)
}

func (r *runner) ownerGet(c *cli.Context, args []string) error {
	owner := args[0]
	if err := checkOwner(owner); err != nil {
		return err
	}
	if c.IsSet("cancel-older") {
		return usageErr("--cancel-older is bump's", "run 'timerctl owner bump OWNER --cancel-older'")
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		epoch, err := s.q.Epoch(ctx, owner)
		if err != nil {
			return err
		}
		w, err := s.q.NextWake(ctx, owner)
		if err != nil {
			return err
		}
		j := api.OwnerJSON{Owner: owner, Epoch: epoch, Scheduled: w.Scheduled, NextWakeAt: optTime(w.Next)}
		return r.emit(s.g, j, func(out io.Writer) error {
			tw := newTable(out)
			fmt.Fprintf(tw, "owner\t%s\n", owner)
			fmt.Fprintf(tw, "epoch\t%d\n", epoch)
			fmt.Fprintf(tw, "scheduled\t%d\n", w.Scheduled)
			fmt.Fprintf(tw, "next wake\t%s\n", fmtTime(w.Next, r.o.Now()))
			return tw.Flush()
		})
	})
}

func (r *runner) ownerBump(c *cli.Context, args []string) error {
	owner := args[0]
	if err := checkOwner(owner); err != nil {
		return err
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		b, err := s.q.BumpEpoch(ctx, owner, queue.BumpOptions{CancelOlder: c.Bool("cancel-older")})
		if err != nil {
			return err
		}
		j := api.BumpedJSON{Owner: owner, Epoch: b.Epoch}
		if b.Cancel != nil {
			job := api.ToCancelJobJSON(*b.Cancel)
			j.CancelJob = &job
		}
		return r.emit(s.g, j, func(out io.Writer) error {
			if _, err := fmt.Fprintf(out, "owner %s is at epoch %d: schedule its timers with --owner %s --epoch %d\n",
				strconv.Quote(owner), b.Epoch, shellQuote(owner), b.Epoch); err != nil || b.Cancel == nil {
				return err
			}
			fmt.Fprintln(out)
			return writeCancelJob(out, *b.Cancel, r.o.Now())
		})
	})
}

// fmtLabels shows labels as key=value, in key order, comma separated; "-"
// for none.
func fmtLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+strconv.Quote(labels[k]))
	}
	return strings.Join(parts, " ")
}

// writeTimerMeta adds a timer's owner, epoch, labels and deadline to
// writeRecord's table, for a timer that has them.
func writeTimerMeta(tw io.Writer, t queue.Timer, now time.Time) {
	if t.Owner != "" {
		fmt.Fprintf(tw, "owner\t%s\n", t.Owner)
		fmt.Fprintf(tw, "epoch\t%d\n", t.Epoch)
	}
	if len(t.Labels) > 0 {
		fmt.Fprintf(tw, "labels\t%s\n", fmtLabels(t.Labels))
	}
	if !t.Deadline.IsZero() {
		fmt.Fprintf(tw, "deadline\t%s\n", fmtTime(t.Deadline, now))
	}
}

// ownerHeads and ownerCells are the OWNER and EPOCH columns of a table of
// timers or dead letters (list, redrive), shown when any row has an owner:
// the epoch is the one the timer was scheduled under. Dashes for a row
// without one.
const ownerHeads = "OWNER\tEPOCH\t"

func ownerCells(owner string, epoch uint64) string {
	if owner == "" {
		return "-\t-\t"
	}
	return owner + "\t" + strconv.FormatUint(epoch, 10) + "\t"
}
