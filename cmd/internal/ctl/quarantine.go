package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// kindQuarantined is the "kind" of an export line that carries a record
// timerq cannot read: one in a quarantine, or one that the listing skipped
// as malformed. Import puts it in the quarantine, never in the timers: a
// round trip keeps its bytes, and never fires it.
const kindQuarantined = "quarantined"

// quarantineLine is a quarantined record as export and `quarantine list -o
// json` write it.
type quarantineLine struct {
	Kind  string `json:"kind,omitempty"`
	ID    string `json:"id"`
	Shard int    `json:"shard"`
	// Reason is why the claim moved it, or why the listing skipped it.
	Reason   string `json:"reason"`
	DueScore string `json:"due_score,omitempty"`
	// QuarantinedAt is absent for a malformed record not moved yet.
	QuarantinedAt *string `json:"quarantined_at,omitempty"`
	Raw           []byte  `json:"raw"` // base64: the record's exact bytes
}

func toQuarantineLine(r queue.QuarantinedRecord) quarantineLine {
	return quarantineLine{ID: r.ID, Shard: r.Shard, Reason: r.Reason, DueScore: r.DueScore,
		QuarantinedAt: optTime(r.QuarantinedAt), Raw: api.WireBytes(r.Raw)}
}

func malformedLine(m queue.MalformedRecord) quarantineLine {
	return quarantineLine{Kind: kindQuarantined, ID: m.ID, Shard: m.Shard, Reason: m.Reason, Raw: api.WireBytes(m.Raw)}
}

// parseQuarantineLine reads an import line of kind quarantined.
func parseQuarantineLine(b []byte) (queue.QuarantinedRecord, error) {
	var l quarantineLine
	if err := json.Unmarshal(b, &l); err != nil {
		return queue.QuarantinedRecord{}, fmt.Errorf("not a quarantined record as export writes it: %v", err)
	}
	if err := queue.ValidateID(l.ID); err != nil {
		return queue.QuarantinedRecord{}, errors.New(cliconf.OneLine(err.Error()))
	}
	r := queue.QuarantinedRecord{ID: l.ID, Shard: l.Shard, Raw: l.Raw, Reason: l.Reason, DueScore: l.DueScore}
	if l.QuarantinedAt != nil {
		t, err := timefmt.Parse(*l.QuarantinedAt)
		if err != nil {
			return queue.QuarantinedRecord{}, fmt.Errorf("quarantined_at %q is not a time", *l.QuarantinedAt)
		}
		r.QuarantinedAt = t
	}
	return r, nil
}

func quarantineCommand(r *runner) *cli.Command {
	return &cli.Command{
		Name:  "quarantine",
		Usage: "records timerq cannot fire, which claims moved aside so the other timers fire",
		Description: `A record that something other than timerq wrote into the namespace, in a form
timerq cannot read, is moved by the claim that meets it to its shard's quarantine, byte for
byte, so that it does not stop the timers beside it. It never fires. Inspect it, fix what
wrote it, then drop it. export carries quarantined records, and import restores them into
the quarantine.`,
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list the quarantined records", ArgsUsage: " ", Action: noArgs(r.quarantineList)},
			{Name: "drop", Usage: "delete a quarantined record for good", ArgsUsage: "ID", Action: r.quarantineDrop},
		},
	}
}

func (r *runner) quarantineList(c *cli.Context) error {
	return show(r, c, func(ctx context.Context, s *session) ([]queue.QuarantinedRecord, error) {
		return s.q.Quarantine().List(ctx)
	},
		func(s *session, recs []queue.QuarantinedRecord) error {
			return r.emit(s.g, mapList(recs, toQuarantineLine), func(w io.Writer) error {
				return writeRows(w, "no quarantined records", "ID\tSHARD\tQUARANTINED\tDUE SCORE\tREASON\tRECORD", recs, func(q queue.QuarantinedRecord) string {
					at := "-"
					if !q.QuarantinedAt.IsZero() {
						at = fmtTime(q.QuarantinedAt, r.o.Now())
					}
					// %q: the record may hold any bytes, and a terminal must
					// not interpret them.
					return fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s", strconv.Quote(q.ID), q.Shard, at, q.DueScore, q.Reason, quoteRaw(q.Raw))
				})
			})
		})
}

// quoteRaw shows a raw record as a Go-quoted string, cut at 60 bytes.
func quoteRaw(b []byte) string {
	const max = 60
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + fmt.Sprintf("… (%d bytes)", len(b))
	}
	return strconv.Quote(string(b))
}

func (r *runner) quarantineDrop(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("give one ID to drop", "the IDs are in timerctl quarantine list")
	}
	id := c.Args().First()
	return r.once(c, func(ctx context.Context, s *session) error {
		ok, err := s.q.Quarantine().Drop(ctx, id)
		if err != nil {
			return err
		}
		if !ok {
			return &Error{Code: ExitNotFound, Problem: fmt.Sprintf("no quarantined record %q in namespace %q", id, s.g.namespace),
				Fix: "the IDs are in timerctl quarantine list", Err: queue.ErrNotFound}
		}
		fmt.Fprintf(r.o.Stdout, "dropped quarantined record %s\n", strconv.Quote(id))
		return nil
	})
}

// warnMalformed tells, on stderr, of the records a listing skipped.
func (r *runner) warnMalformed(ms []queue.MalformedRecord) {
	for _, m := range ms {
		fmt.Fprintf(r.o.Stderr, "timerctl: warning: skipped record %s of shard %d, which timerq cannot read (%s): "+
			"a due one goes to the quarantine at the next claim (timerctl quarantine list)\n", strconv.Quote(m.ID), m.Shard, m.Reason)
	}
}
