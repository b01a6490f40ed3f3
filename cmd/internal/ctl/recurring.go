package ctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/schedule"
)

// recurringFlags are the schedule command's flags that make it create (or,
// with --update, change) a recurring schedule instead of a one-shot timer.
func recurringFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "every", Usage: "recurring: a fixed interval `DURATION`, e.g. 90s"},
		&cli.StringFlag{Name: "min-every", Value: defaultMinEvery.String(), Usage: "recurring: refuse an --every shorter than `DURATION`, a guard against typos such as 10ms for 10m; lower it to allow one"},
		&cli.StringFlag{Name: "anchor", Usage: "recurring: --every occurrences fall on `TIME` + k*interval (default: now)"},
		&cli.StringFlag{Name: "cron", Usage: "recurring: a cron `SPEC`: 5 fields, 6 with seconds first, or @daily etc."},
		&cli.StringFlag{Name: "tz", Usage: "recurring: the IANA time `ZONE` of --cron, e.g. Europe/Berlin (default UTC)"},
		&cli.StringFlag{Name: "catch-up", Usage: "recurring: after downtime, `POLICY` once (default), skip or all"},
		&cli.IntFlag{Name: "catch-up-limit", Usage: "recurring: with --catch-up all, fire at most `N` missed (default 10)"},
		&cli.StringFlag{Name: "jitter", Usage: "recurring: delay each occurrence by a seeded spread in [0, `DURATION`)"},
		&cli.StringFlag{Name: "end", Usage: "recurring: no occurrence after `TIME`"},
		&cli.Int64Flag{Name: "max-count", Usage: "recurring: fire `N` occurrences in all"},
		&cli.IntFlag{Name: "ahead", Usage: "recurring: keep `N` occurrences armed ahead (default 2)"},
		&cli.StringFlag{Name: "overlap", Usage: "recurring: `POLICY` allow (default) or skip: skip an occurrence while a consumer group has the previous one unacknowledged"},
		&cli.BoolFlag{Name: "update", Usage: "recurring: change an existing schedule (without it, an existing ID is left as it is)"},
	}
}

// defaultMinEvery is the shortest --every timerctl takes without
// --min-every: `--every 10ms` for 10m fired 618 times in 6 s. The Go API
// takes down to 1 ms (queue.Recurring.Every).
const defaultMinEvery = time.Second

// perMinute is how many occurrences an interval of every makes a minute.
func perMinute(every time.Duration) int64 {
	if every <= 0 {
		return 0
	}
	return int64(time.Minute / every)
}

// unitHint reads a short --every as the typo it likely is, "10ms" for
// 10m, and asks; "" when it cannot tell.
func unitHint(s string) string {
	for _, u := range []struct{ short, long string }{{"ms", "m"}, {"us", "s"}, {"µs", "s"}, {"ns", "s"}} {
		if n, ok := strings.CutSuffix(s, u.short); ok && timefmt.IsBareNumber(n) {
			return fmt.Sprintf("did you mean --every %s%s? ", n, u.long)
		}
	}
	return ""
}

// isRecurring reports whether the schedule command was asked for a
// recurring schedule.
func isRecurring(c *cli.Context) bool { return c.IsSet("every") || c.IsSet("cron") }

func (r *runner) scheduleRecurring(c *cli.Context) error {
	id, err := oneID(c)
	if err != nil {
		return err
	}
	if c.IsSet("at") || c.IsSet("in") {
		return usageErr("--at/--in and --every/--cron are both given", "a recurring schedule takes --every or --cron; a one-shot timer --at or --in")
	}
	rec := queue.Recurring{ID: id, Spec: c.String("cron"), CatchUp: queue.CatchUp(c.String("catch-up")),
		CatchUpLimit: c.Int("catch-up-limit"), MaxCount: c.Int64("max-count"), Ahead: c.Int("ahead"),
		Overlap: queue.Overlap(c.String("overlap")), Endpoint: c.String("deliver"), URL: c.String("deliver-url"),
		FlowKey: c.String("flow-key")}
	if c.IsSet("flow-key") {
		if err := queue.ValidateFlowKey(rec.FlowKey); err != nil {
			return err
		}
	}
	if c.IsSet("epoch") || c.IsSet("fire-within") {
		return usageErr("--epoch and --fire-within are a one-shot timer's, not a recurring schedule's",
			"drop them: each occurrence records its owner's epoch when it is armed")
	}
	if rec.Owner, err = ownerOf(c); err != nil {
		return err
	}
	if rec.Labels, err = labelsOf(c); err != nil {
		return err
	}
	if c.IsSet("every") && c.IsSet("cron") {
		return usageErr("both --every and --cron are given", "give one of them")
	}
	if c.IsSet("every") {
		if rec.Every, err = parseIn("every", c.String("every")); err != nil {
			return err
		}
		minEvery, err := parseIn("min-every", c.String("min-every"))
		if err != nil {
			return err
		}
		switch {
		case rec.Every == 0:
			return usageErr(fmt.Sprintf("--every %q is not an interval", c.String("every")), "use a positive duration, e.g. --every 10m")
		case rec.Every < minEvery:
			return usageErr(fmt.Sprintf("--every %s is shorter than the minimum interval of %s: %d occurrences a minute", c.String("every"), minEvery, perMinute(rec.Every)),
				fmt.Sprintf("%sto mean it, add --min-every %s", unitHint(c.String("every")), rec.Every))
		}
	} else if c.IsSet("min-every") {
		return usageErr("--min-every is given without --every", "it bounds --every; drop it")
	}
	if c.IsSet("jitter") {
		if rec.Jitter, err = parseIn("jitter", c.String("jitter")); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"anchor", &rec.Anchor}, {"end", &rec.End}} {
		if c.IsSet(f.name) {
			if *f.dst, err = parseTime(f.name, c.String(f.name)); err != nil {
				return err
			}
		}
	}
	if c.IsSet("tz") {
		if rec.Location, err = time.LoadLocation(c.String("tz")); err != nil {
			return usageErr(fmt.Sprintf("--tz %q is not a time zone", c.String("tz")), "use an IANA name such as Europe/Berlin or UTC")
		}
	}
	if rec.Payload, err = r.payload(c); err != nil {
		return err
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		if c.Bool("update") {
			info, err := s.q.Recurring().Update(ctx, rec)
			if err != nil {
				return s.redisErr(err)
			}
			return r.scheduleOut(s, info, "updated")
		}
		info, created, err := s.q.Recurring().Put(ctx, rec)
		if err != nil {
			return s.redisErr(err)
		}
		note := "created"
		if !created {
			note = "already existed, left unchanged (use --update to change it)"
		}
		return r.scheduleOut(s, info, note)
	})
}

// schedulesCommand is `timerctl schedules list|get|pause|resume|delete|
// export|import`.
func (r *runner) schedulesCommand() *cli.Command {
	byID := func(name string) verb {
		return verb{name: name, arg: "schedule ID", fix: "e.g. timerctl schedules " + name + " nightly-report", run: r.scheduleByID}
	}
	return verbCommand(&cli.Command{
		Name: "schedules", Usage: "list, show, pause, resume or delete recurring schedules",
		ArgsUsage: "list | get ID | pause ID | resume ID | delete ID | export | import [FILE|-]",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "list: page size, 1-1000"},
			&cli.StringFlag{Name: "cursor", Usage: "list: continue from the cursor `C` a previous page printed"},
		},
	}, verb{name: "list", fix: "schedules list takes no ID", run: r.schedulesList},
		byID("get"), byID("pause"), byID("resume"), byID("delete"),
		verb{name: "export", fix: "schedules export takes none; it writes to stdout", run: r.exportSchedules},
		verb{name: "import", arg: "FILE", optional: true, fix: "give one FILE, or - for stdin", run: r.importSchedules})
}

func (r *runner) schedulesList(c *cli.Context, _ []string) error {
	return show(r, c, func(ctx context.Context, s *session) (queue.RecurringPage, error) {
		return s.q.Recurring().List(ctx, queue.RecurringListOptions{Limit: c.Int("limit"), Cursor: c.String("cursor")})
	}, r.schedulesOut)
}

// scheduleByID runs get, pause, resume or delete.
func (r *runner) scheduleByID(c *cli.Context, args []string) error {
	verb, id := c.Args().First(), args[0]
	ops := map[string]func(queue.RecurringTimers, context.Context, string) (queue.RecurringInfo, error){
		"get": queue.RecurringTimers.Get, "pause": queue.RecurringTimers.Pause, "resume": queue.RecurringTimers.Resume,
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		if verb == "delete" {
			if err := s.q.Recurring().Delete(ctx, id); err != nil {
				return err
			}
			return r.emitf(s.g, map[string]any{"id": id, "deleted": true}, "deleted schedule %s; its pending occurrences are cancelled\n", id)
		}
		info, err := ops[verb](s.q.Recurring(), ctx, id)
		if err != nil {
			return err
		}
		return r.scheduleOut(s, info, "")
	})
}

// scheduleJSON is a schedule in JSON output (docs/timerctl.md): the HTTP
// API's schedule, and a note of what the command did.
type scheduleJSON struct {
	api.ScheduleJSON
	Note string `json:"note,omitempty"`
}

func toScheduleJSON(in queue.RecurringInfo) scheduleJSON {
	return scheduleJSON{ScheduleJSON: api.ToScheduleJSON(in)}
}

func specText(in queue.RecurringInfo) string {
	if in.Every > 0 {
		return "every " + in.Every.String() + " from " + in.Anchor.UTC().Format(time.RFC3339Nano)
	}
	tz := "UTC"
	if in.Location != nil {
		tz = in.Location.String()
	}
	return fmt.Sprintf("cron %q in %s", in.Spec, tz)
}

func (r *runner) scheduleOut(s *session, in queue.RecurringInfo, note string) error {
	j := toScheduleJSON(in)
	j.Note = note
	return r.emit(s.g, j, func(w io.Writer) error { return writeSchedule(w, in, note, r.o.Now()) })
}

// writeSchedule prints a schedule as a two-column table.
func writeSchedule(out io.Writer, in queue.RecurringInfo, note string, now time.Time) error {
	w := newTable(out)
	row := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	row("id", in.ID)
	row("spec", specText(in))
	row("state", fmt.Sprintf("%s (version %d)", in.State, in.Version))
	row("payload", fmtPayload(in.Payload))
	limits := []string{"catch-up " + string(in.CatchUp), "ahead " + fmt.Sprint(in.Ahead)}
	if in.CatchUp == queue.CatchUpAll {
		limits[0] += fmt.Sprintf(" (at most %d)", in.CatchUpLimit)
	}
	if in.Jitter > 0 {
		limits = append(limits, "jitter "+in.Jitter.String())
	}
	if !in.End.IsZero() {
		limits = append(limits, "end "+in.End.UTC().Format(time.RFC3339))
	}
	if in.MaxCount > 0 {
		limits = append(limits, fmt.Sprintf("max count %d", in.MaxCount))
	}
	limits = append(limits, "overlap "+string(cmp.Or(in.Overlap, queue.OverlapAllow)))
	row("policies", strings.Join(limits, ", "))
	row("count", fmt.Sprintf("%d armed (fired and pending)", in.Count))
	// A list takes a row each, labelled on its first; an empty one a dash.
	rows := func(k string, vs []string) {
		if len(vs) == 0 {
			vs = []string{"-"}
		}
		for _, v := range vs {
			row(k, v)
			k = ""
		}
	}
	rows("pending", mapList(in.Pending, func(o queue.Occurrence) string { return o.ID + "  due " + fmtTime(o.Due, now) }))
	rows("next", mapList(in.Next, func(t time.Time) string { return fmtTime(t, now) }))
	if note != "" {
		row("note", note)
	}
	return w.Flush()
}

func (r *runner) schedulesOut(s *session, page queue.RecurringPage) error {
	return r.emit(s.g, struct {
		Schedules  []scheduleJSON `json:"schedules"`
		NextCursor string         `json:"next_cursor"`
	}{mapList(page.Schedules, toScheduleJSON), page.NextCursor}, func(w io.Writer) error {
		err := writeRows(w, "", "ID\tSTATE\tSPEC\tNEXT\tCOUNT", page.Schedules, func(in queue.RecurringInfo) string {
			next := "-"
			if len(in.Next) > 0 {
				next = fmtTime(in.Next[0], r.o.Now())
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%d", in.ID, in.State, specText(in), next, in.Count)
		})
		if err == nil && page.NextCursor != "" {
			_, err = fmt.Fprintf(w, "more: timerctl schedules list --cursor %s\n", page.NextCursor)
		}
		return err
	})
}

// exportSchedules prints every schedule as one JSON line, the schedule
// lines of `timerctl export` ({"kind":"schedule",...}), which
// importSchedules and import restore: spec, zone, policies, payload, state,
// count, last armed time, creation time, pending occurrences.
func (r *runner) exportSchedules(c *cli.Context, _ []string) error {
	s, err := r.open(c)
	if err != nil {
		return err
	}
	defer s.close()
	return writeSchedules(c, s, r.o.Stdout)
}

// importSchedules restores the schedules exportSchedules wrote, as import
// restores schedule lines, reading every line as one (older versions
// wrote them without a kind). Existing IDs are left as they are. A bad
// line is reported and skipped; the exit code is then 2, as for import.
func (r *runner) importSchedules(c *cli.Context, args []string) error {
	return r.importFile(c, strings.Join(args, ""), kindSchedule)
}

// scheduleInfo is the schedule an exported line describes, for
// queue.RecurringTimers.Restore.
func scheduleInfo(j api.ScheduleJSON) (queue.RecurringInfo, error) {
	in := queue.RecurringInfo{State: queue.RecurringState(j.State), Count: j.Count}
	in.Recurring = queue.Recurring{ID: j.ID, Spec: j.Cron, Payload: j.Payload, CatchUp: queue.CatchUp(j.CatchUp),
		CatchUpLimit: j.CatchUpLimit, MaxCount: j.MaxCount, Ahead: j.Ahead, Overlap: queue.Overlap(j.Overlap),
		FlowKey: j.FlowKey, Owner: j.Owner, Labels: j.Labels}
	if d := j.Deliver; d != nil {
		in.Endpoint, in.URL = deref(d.Endpoint), deref(d.URL)
	}
	var err error
	if j.TZ != "" {
		if in.Location, err = time.LoadLocation(j.TZ); err != nil {
			return in, fmt.Errorf("tz %q: %v", j.TZ, err)
		}
	}
	durs := []struct {
		s   string
		dst *time.Duration
	}{{j.Every, &in.Every}, {j.Jitter, &in.Jitter}}
	for _, d := range durs {
		if d.s != "" {
			if *d.dst, err = time.ParseDuration(d.s); err != nil {
				return in, fmt.Errorf("duration %q: %v", d.s, err)
			}
		}
	}
	times := []struct {
		s   *string
		dst *time.Time
	}{{j.Anchor, &in.Anchor}, {j.End, &in.End}, {j.Last, &in.Last}, {&j.CreatedAt, &in.CreatedAt}, {&j.UpdatedAt, &in.UpdatedAt}}
	for _, t := range times {
		if t.s != nil && *t.s != "" {
			if *t.dst, err = time.Parse(time.RFC3339Nano, *t.s); err != nil {
				return in, fmt.Errorf("time %q: %v", *t.s, err)
			}
		}
	}
	for _, o := range j.Pending {
		nominal, err1 := time.Parse(time.RFC3339Nano, o.Nominal)
		due, err2 := time.Parse(time.RFC3339Nano, o.DueAt)
		if err := cmp.Or(err1, err2); err != nil {
			return in, fmt.Errorf("pending occurrence %q: %v", o.ID, err)
		}
		in.Pending = append(in.Pending, queue.Occurrence{ID: o.ID, Nominal: nominal, Due: due})
	}
	return in, nil
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// isBadInput reports whether err is about the input line, not about Redis.
func isBadInput(err error) bool {
	for _, s := range []error{schedule.ErrInvalidSchedule, queue.ErrInvalidID, queue.ErrInvalidDue,
		queue.ErrInvalidOptions, queue.ErrPayloadTooLarge} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
