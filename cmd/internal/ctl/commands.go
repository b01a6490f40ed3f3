package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

func (r *runner) commands() []*cli.Command {
	// Fresh flags per command: urfave/cli flags carry parse state.
	when := func(more ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{
			&cli.StringFlag{Name: "at", Usage: "due `TIME`: RFC 3339, or Unix time with its unit: 1796238000s, 1796238000000ms"},
			&cli.StringFlag{Name: "in", Usage: "due `DURATION` from now by the Redis server's clock, e.g. 90s, 5m, 1h30m"},
		}, more...)
	}
	return []*cli.Command{
		{
			Name: "schedule", Usage: "create a timer, or a recurring schedule (idempotent: an existing ID is left as it is)",
			ArgsUsage: "ID (--at TIME | --in DURATION | --every DURATION | --cron SPEC [--tz ZONE]) [--payload TEXT | --payload-file PATH|-] [--owner OWNER [--epoch N]] [--label KEY=VALUE]...",
			Flags: append(when(
				&cli.StringFlag{Name: "payload", Aliases: []string{"p"}, Usage: "payload `TEXT`"},
				&cli.StringFlag{Name: "payload-file", Usage: "read the payload from `PATH`, or stdin for -"},
				&cli.StringFlag{Name: "deliver", Usage: "deliver the fire to the namespace's endpoint `NAME` (timerctl endpoints)"},
				&cli.StringFlag{Name: "deliver-url", Usage: "with --deliver: POST to `URL` instead of the endpoint's, under its secrets and policy (timerctl delivery-policy must allow timer URLs)"},
				&cli.StringFlag{Name: "flow-key", Usage: "the timer's (or each occurrence's) flow `KEY`: its delivery is held to the key's flow policy (timerctl flow)"},
				ownerFlag("the timer's (or each occurrence's) owner `OWNER`, such as a workflow's ID: cancel --owner and list --owner select by it"),
				labelFlag("a label `KEY=VALUE` of the timer (or of each occurrence); repeat for more"),
				&cli.Uint64Flag{Name: "epoch", Usage: "with --owner: schedule only under the owner's epoch `N` ('timerctl owner bump' prints it); another is refused with exit code 4"},
				&cli.StringFlag{Name: "fire-within", Usage: "deliver the fire at most `DURATION` after its due time; later it is dead-lettered (reason deadline)"},
			), recurringFlags()...),
			Action: r.schedule,
		},
		r.schedulesCommand(),
		r.debounceCommand(),
		{Name: "get", Usage: "show a timer", ArgsUsage: "ID", Action: r.get},
		{
			Name: "list", Usage: "list timers by due time", ArgsUsage: " ",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "state", Usage: "only `STATE`: scheduled, fired or cancelled"},
				&cli.StringFlag{Name: "due-from", Usage: "only due at or after `TIME`"},
				&cli.StringFlag{Name: "due-to", Usage: "only due at or before `TIME`"},
				&cli.IntFlag{Name: "limit", Value: 100, Usage: "page size, 1-1000"},
				&cli.StringFlag{Name: "cursor", Usage: "continue from the cursor `C` a previous page printed"},
				ownerFlag("only the timers of `OWNER` (a page may then hold fewer than --limit, even none, and still go on)"),
				labelFlag("only timers with the label `KEY=VALUE`; repeat for more, all must match"),
			},
			Action: noArgs(r.list),
		},
		r.cancelCommand(),
		r.cancelJobsCommand(),
		{
			Name: "reschedule", Usage: "move a scheduled timer to another due time",
			ArgsUsage: "ID (--at TIME | --in DURATION)", Flags: when(), Action: r.reschedule,
		},
		{Name: "fire", Usage: "make a scheduled timer due now", ArgsUsage: "ID", Action: r.fire},
		{
			Name: "wait", Usage: "block until a timer fires", ArgsUsage: "ID [--timeout D]",
			Flags: []cli.Flag{
				&cli.DurationFlag{Name: "timeout", Usage: "give up after `D` with exit code 5 (0: wait forever)"},
			},
			Action: r.wait,
		},
		r.redriveCommand(),
		r.deliveryPolicyCommand(),
		{Name: "stats", Usage: "counts per state, the overdue backlog and a histogram of due times", ArgsUsage: " ", Action: noArgs(r.stats)},
		{
			Name: "import", Usage: "schedule new timers and restore exported ones from JSON Lines", ArgsUsage: "[FILE|-]",
			Description: `Each line is a timer as export writes it, restored with its state and times:
   {"id": ID, "state": STATE, "due_at": TIME, "created_at": TIME, ["fired_at" | "cancelled_at": TIME,] "payload": BASE64
    [, "owner": OWNER, "epoch": N, "labels": {KEY: VALUE}, "deadline": TIME]}
or a new timer to schedule:
   {"id": ID, "due_at": TIME | "in": DURATION, "payload": BASE64 | "payload_text": TEXT
    [, "owner": OWNER, "epoch": N, "labels": {KEY: VALUE}, "fire_within_ms": MS | "fire_by": TIME]}
TIME is a string: RFC 3339, "1796238000s" or "1796238000000ms". An existing ID is left as it is.
Bad lines are reported with their line number and skipped; the exit code is then 2.`,
			Action: r.importCmd,
		},
		{
			Name: "export", Usage: "print timers, every field, as JSON Lines that import restores", ArgsUsage: " ",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "state", Usage: "only `STATE`: scheduled, fired or cancelled"},
			},
			Action: noArgs(r.export),
		},
		{Name: "watch", Usage: "follow fire events live until Ctrl-C", ArgsUsage: " ", Action: noArgs(r.watch)},
		quarantineCommand(r),
		{Name: "version", Usage: "print the version", ArgsUsage: " ", Action: noArgs(r.version)},
		{
			Name: "completion", Usage: "print a shell completion script", ArgsUsage: "bash|zsh",
			Description: "bash: source <(timerctl completion bash)\n   zsh:  source <(timerctl completion zsh)",
			BashComplete: func(c *cli.Context) {
				fmt.Fprintln(c.App.Writer, "bash\nzsh")
			},
			Action: r.completion,
		},
	}
}

// oneArg returns the command's single argument, what it names.
func oneArg(c *cli.Context, what string) (string, error) {
	switch c.NArg() {
	case 0:
		return "", usageErr("missing "+what, helpFix(c))
	case 1:
		return c.Args().First(), nil
	}
	return "", usageErr(fmt.Sprintf("too many arguments: %q", c.Args().Slice()), helpFix(c))
}

// oneID returns the command's single ID argument.
func oneID(c *cli.Context) (string, error) {
	id, err := oneArg(c, "the timer ID")
	if err == nil {
		err = queue.ValidateID(id)
	}
	return id, err
}

// noArgs is the action of a command that takes no arguments (ArgsUsage
// " "): it refuses any, then runs action.
func noArgs(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() > 0 {
			return usageErr(fmt.Sprintf("unexpected arguments: %q", c.Args().Slice()), helpFix(c))
		}
		return action(c)
	}
}

// parseTime parses the TIME of --flag by timefmt.Parse's rules, the
// dashboard's too: RFC 3339, or Unix time with its unit; a bare number is
// refused rather than guessed.
func parseTime(flag, s string) (time.Time, error) {
	t, err := timefmt.Parse(s)
	if e, ok := err.(*timefmt.Error); ok {
		return t, usageErr(fmt.Sprintf("--%s %q %s", flag, s, e.Problem), e.Fix)
	}
	return t, nil
}

// parseDelay parses a DURATION: Go's syntax, 0 or more.
func parseDelay(s string) (time.Duration, *timefmt.Error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &timefmt.Error{Problem: "is not a duration", Fix: "use Go's syntax, e.g. 90s, 5m or 1h30m"}
	}
	if d < 0 {
		return 0, &timefmt.Error{Problem: "is negative", Fix: "use a duration of 0 or more, or --at for a time in the past"}
	}
	return d, nil
}

// parseIn parses the DURATION of --flag (see parseDelay).
func parseIn(flag, s string) (time.Duration, error) {
	d, e := parseDelay(s)
	if e == nil {
		return d, nil
	}
	fix := e.Fix
	if d, perr := time.ParseDuration(s); perr == nil && d < 0 && flag != "in" {
		// The --at advice fits a delay only.
		fix = fmt.Sprintf("use a positive duration, e.g. --%s %s", flag, -d)
	}
	return 0, usageErr(fmt.Sprintf("--%s %q %s", flag, s, e.Problem), fix)
}

// due is a due time from the command line: an instant (--at), or a delay
// (--in) that Redis adds to its own clock, so the client's clock plays no
// part.
type due struct {
	at       time.Time
	in       time.Duration
	relative bool
}

// dueFlag reads exactly one of --at and --in.
func (r *runner) dueFlag(c *cli.Context) (due, error) {
	at, in := c.IsSet("at"), c.IsSet("in")
	switch {
	case at && in:
		return due{}, usageErr("both --at and --in are given", "give one of them")
	case at:
		t, err := parseTime("at", c.String("at"))
		return due{at: t}, err
	case in:
		d, err := parseIn("in", c.String("in"))
		return due{in: d, relative: true}, err
	}
	return due{}, usageErr("missing the due time", "give --at TIME or --in DURATION")
}

// payload reads --payload or --payload-file.
func (r *runner) payload(c *cli.Context) ([]byte, error) {
	text, file := c.IsSet("payload"), c.IsSet("payload-file")
	switch {
	case text && file:
		return nil, usageErr("both --payload and --payload-file are given", "give one of them")
	case text:
		return []byte(c.String("payload")), nil
	case !file:
		return nil, nil
	}
	path := c.String("payload-file")
	limit := int64(queue.MaxPayloadLimit) + 1 // the queue checks its own, lower limit
	var rd io.Reader
	if path == "-" {
		rd = r.o.Stdin
	} else {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, usageErr(fmt.Sprintf("--payload-file %q does not exist", path), "check the path, or use - to read stdin")
		}
		if err != nil {
			return nil, &Error{Code: ExitFailure, Problem: fmt.Sprintf("--payload-file: %v", err), Fix: "check the file's permissions", Err: err}
		}
		defer f.Close()
		rd = f
	}
	b, err := io.ReadAll(io.LimitReader(rd, limit))
	if err == nil && int64(len(b)) == limit {
		// Over any limit: count the rest, without keeping it, so that
		// the error reports the payload's real size.
		var rest int64
		rest, err = io.Copy(io.Discard, rd)
		if err == nil {
			return nil, payloadTooLarge(int64(len(b))+rest, "--payload-file "+path)
		}
	}
	if err != nil {
		return nil, &Error{Code: ExitFailure, Problem: fmt.Sprintf("reading --payload-file %s: %v", path, err), Fix: "check the file", Err: err}
	}
	return b, nil
}

// payloadWithin reads the payload as payload does and refuses one over
// the namespace's limit (timerctl uses queue's default) before connecting.
func (r *runner) payloadWithin(c *cli.Context) ([]byte, error) {
	p, err := r.payload(c)
	if err != nil || len(p) <= queue.DefaultMaxPayloadBytes {
		return p, err
	}
	what := "--payload"
	if c.IsSet("payload-file") {
		what = "--payload-file " + c.String("payload-file")
	}
	return nil, payloadTooLarge(int64(len(p)), what)
}

// payloadTooLarge is the usage error of a payload over the limit of the
// namespace's queue (timerctl uses queue's default).
func payloadTooLarge(size int64, what string) error {
	return &Error{Code: ExitUsage,
		Problem: fmt.Sprintf("%s is %d bytes, over the payload limit of %d bytes", what, size, queue.DefaultMaxPayloadBytes),
		Fix:     "store large data elsewhere and put a reference (a key or URL) in the payload",
		Err:     queue.ErrPayloadTooLarge}
}

// recordOut prints one timer in the chosen format, with, if created is
// not nil, whether schedule created it.
func (r *runner) recordOut(s *session, t queue.Timer, created *bool) error {
	j := api.ToTimerJSON(t)
	j.Created = created
	note := ""
	if created != nil {
		note = map[bool]string{true: "created", false: "already existed, left unchanged"}[*created]
	}
	return r.emit(s.g, j, func(w io.Writer) error { return writeRecord(w, t, r.o.Now(), note) })
}

func (r *runner) schedule(c *cli.Context) error {
	if isRecurring(c) {
		return r.scheduleRecurring(c)
	}
	id, err := oneID(c)
	if err != nil {
		return err
	}
	due, err := r.dueFlag(c)
	if err != nil {
		return err
	}
	p, err := r.payloadWithin(c)
	if err != nil {
		return err
	}
	if c.IsSet("deliver-url") && !c.IsSet("deliver") {
		return usageErr("--deliver-url needs --deliver", "name the endpoint whose secrets and retry policy apply: --deliver NAME --deliver-url URL")
	}
	ep, key := c.String("deliver"), c.String("flow-key")
	if c.IsSet("deliver") {
		if err := queue.ValidateEndpointName(ep); err != nil {
			return err
		}
	}
	if c.IsSet("flow-key") {
		if err := queue.ValidateFlowKey(key); err != nil {
			return err
		}
	}
	t := queue.NewTimer{ID: id, Due: due.at, Payload: p}
	if due.relative {
		t = queue.NewTimerIn(id, due.in, p)
	}
	t.Endpoint, t.URL, t.FlowKey = ep, c.String("deliver-url"), key
	if err := newTimerMeta(c, &t); err != nil {
		return err
	}
	plain := ep == "" && key == "" && !due.relative && t.Owner == "" && t.Labels == nil && t.FireWithin == 0
	return r.once(c, func(ctx context.Context, s *session) error {
		res := []queue.ScheduleResult{{}}
		if plain {
			// Schedule's errors speak of a timer, ScheduleBatch's of a batch item.
			res[0], err = s.q.Schedule(ctx, id, due.at, p)
		} else {
			res, err = s.q.ScheduleBatch(ctx, []queue.NewTimer{t})
		}
		if err != nil {
			return err
		}
		return r.recordOut(s, res[0].Timer, &res[0].Created)
	})
}

// once opens a session, runs fn with a context bounded by --timeout,
// explains its error by its cause (redisErr), and closes the session.
func (r *runner) once(c *cli.Context, fn func(context.Context, *session) error) error {
	s, err := r.open(c)
	if err != nil {
		return err
	}
	defer s.close()
	ctx, cancel := s.ctx(c)
	defer cancel()
	return s.redisErr(fn(ctx, s))
}

// show runs get in a session (once) and prints what it returns with print.
func show[T any](r *runner, c *cli.Context, get func(context.Context, *session) (T, error), print func(*session, T) error) error {
	return r.once(c, func(ctx context.Context, s *session) error {
		v, err := get(ctx, s)
		if err != nil {
			return err
		}
		return print(s, v)
	})
}

// byID runs one of the queue's single-timer operations and prints the
// timer it returns.
func (r *runner) byID(c *cli.Context, op func(context.Context, *queue.Queue, string) (queue.Timer, error)) error {
	id, err := oneID(c)
	if err != nil {
		return err
	}
	return show(r, c, func(ctx context.Context, s *session) (queue.Timer, error) { return op(ctx, s.q, id) },
		func(s *session, t queue.Timer) error { return r.recordOut(s, t, nil) })
}

// get prints a timer, and for a fired one whose fires were delivered to
// an endpoint, its attempt log.
func (r *runner) get(c *cli.Context) error {
	id, err := oneID(c)
	if err != nil {
		return err
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		t, err := s.q.Get(ctx, id)
		if err != nil {
			return err
		}
		var log []queue.DeliveryAttempt
		if t.State == queue.StateFired {
			if log, err = s.q.Deliveries().Attempts(ctx, id); err != nil {
				return err
			}
		}
		j := api.ToTimerJSON(t)
		j.Delivery = api.ToDeliveryLogJSON(log)
		return r.emit(s.g, j, func(w io.Writer) error { return writeRecord(w, t, r.o.Now(), "", log...) })
	})
}

func (r *runner) fire(c *cli.Context) error {
	return r.byID(c, func(ctx context.Context, q *queue.Queue, id string) (queue.Timer, error) { return q.FireNow(ctx, id) })
}

func (r *runner) reschedule(c *cli.Context) error {
	if _, err := oneID(c); err != nil {
		return err
	}
	due, err := r.dueFlag(c)
	if err != nil {
		return err
	}
	return r.byID(c, func(ctx context.Context, q *queue.Queue, id string) (queue.Timer, error) {
		if due.relative {
			return q.RescheduleIn(ctx, id, due.in)
		}
		return q.Reschedule(ctx, id, due.at)
	})
}

// listOptions reads list's and export's filters.
func listOptions(c *cli.Context) (queue.ListOptions, error) {
	var o queue.ListOptions
	if c.IsSet("state") {
		st, err := queue.ParseState(c.String("state"))
		if err != nil {
			return o, usageErr(fmt.Sprintf("--state %q is not a state", c.String("state")), "use scheduled, fired or cancelled")
		}
		o.State = st
	}
	var err error
	if c.IsSet("due-from") {
		if o.DueFrom, err = parseTime("due-from", c.String("due-from")); err != nil {
			return o, err
		}
	}
	if c.IsSet("due-to") {
		if o.DueTo, err = parseTime("due-to", c.String("due-to")); err != nil {
			return o, err
		}
	}
	if c.IsSet("due-from") && c.IsSet("due-to") && o.DueTo.Before(o.DueFrom) {
		// An empty range, which would list nothing and say nothing.
		return o, usageErr(fmt.Sprintf("--due-from %s is after --due-to %s", c.String("due-from"), c.String("due-to")),
			"swap them: --due-from is the earlier end of the range")
	}
	if o.Owner, err = ownerOf(c); err != nil {
		return o, err
	}
	o.Labels, err = labelsOf(c)
	return o, err
}

func (r *runner) list(c *cli.Context) error {
	o, err := listOptions(c)
	if err != nil {
		return err
	}
	o.Limit = c.Int("limit")
	if o.Limit < 1 || o.Limit > queue.MaxBatch {
		return usageErr(fmt.Sprintf("--limit %d is outside 1-%d", o.Limit, queue.MaxBatch), "use a page size in that range, and --cursor for the next page")
	}
	o.Cursor = c.String("cursor")
	return r.once(c, func(ctx context.Context, s *session) error {
		page, err := s.q.List(ctx, o)
		if err != nil {
			if errors.Is(err, queue.ErrInvalidOptions) {
				return usageErr(fmt.Sprintf("--cursor %q is not a cursor that list printed", o.Cursor), "copy it from list's output, or leave it out to start over")
			}
			return s.redisErr(err)
		}
		r.warnMalformed(page.Malformed)
		if len(page.Timers) == 0 && o.Cursor == "" {
			r.warnIfNothing(ctx, s, nil)
		}
		return r.printPage(c, s, page)
	})
}

// printPage prints one page of list.
func (r *runner) printPage(c *cli.Context, s *session, page queue.ListPage) error {
	if s.g.json && page.NextCursor != "" {
		// stdout stays one JSON array; the cursor goes beside it.
		defer fmt.Fprintf(r.o.Stderr, "next cursor: %s\n", page.NextCursor)
	}
	return r.emit(s.g, mapList(page.Timers, api.ToTimerJSON), func(w io.Writer) error {
		err := writeList(w, page.Timers, r.o.Now())
		if err == nil && page.NextCursor != "" {
			_, err = fmt.Fprintf(w, "\nmore: %s\n", nextPageCommand(c, s.g.namespace, page.NextCursor))
		}
		return err
	})
}

// nextPageCommand is the list command that prints the next page of the
// same query: the namespace, the filters and the page size, with the new
// cursor. --redis stays out (it may hold a password); the one in use comes
// from TIMERQ_REDIS_URL or has to be added.
func nextPageCommand(c *cli.Context, ns, cursor string) string {
	cmd := "timerctl -n " + shellQuote(ns) + " list"
	for _, f := range []string{"state", "due-from", "due-to", "owner"} {
		if c.IsSet(f) {
			cmd += " --" + f + " " + shellQuote(c.String(f))
		}
	}
	for _, l := range cliconf.MultiValues(c, "label") {
		cmd += " --label " + shellQuote(l)
	}
	if c.IsSet("limit") {
		cmd += fmt.Sprintf(" --limit %d", c.Int("limit"))
	}
	return cmd + " --cursor " + shellQuote(cursor)
}

// shellQuote quotes s for pasting into a POSIX shell.
func shellQuote(s string) string {
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@%+=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (r *runner) wait(c *cli.Context) error {
	id, err := oneID(c)
	if err != nil {
		return err
	}
	limit := c.Duration("timeout")
	if limit < 0 {
		return usageErr(fmt.Sprintf("--timeout %v is negative", limit), "use a positive duration, or 0 to wait forever")
	}
	s, err := r.open(c)
	if err != nil {
		return err
	}
	defer s.close()
	// One bounded read first: an unknown timer or an unreachable Redis fails
	// at once instead of looking like a long wait.
	ctx, cancel := s.ctx(c)
	t, err := s.q.Get(ctx, id)
	cancel()
	if err != nil {
		return s.redisErr(err)
	}
	if t.State == queue.StateScheduled {
		wctx := c.Context
		if limit > 0 {
			var stop context.CancelFunc
			wctx, stop = context.WithTimeoutCause(wctx, limit, errWaitTimeout)
			defer stop()
		}
		err = s.q.Wait(wctx, id)
		if err != nil && errors.Is(context.Cause(wctx), errWaitTimeout) {
			return &Error{Code: ExitTimeout, Problem: fmt.Sprintf("timer %q did not fire within %v", id, limit),
				Fix: "wait longer with --timeout, or check that a timerworker runs for this namespace"}
		}
		if err != nil {
			return s.redisErr(err)
		}
		ctx, cancel := s.ctx(c)
		defer cancel()
		if t, err = s.q.Get(ctx, id); err != nil {
			return s.redisErr(err)
		}
	}
	if t.State == queue.StateCancelled {
		return s.redisErr(fmt.Errorf("%w: %q was cancelled at %s", queue.ErrCancelled, id, timefmt.Format(t.CancelledAt)))
	}
	return r.recordOut(s, t, nil)
}

func (r *runner) version(c *cli.Context) error {
	g, err := r.globals()
	if err != nil {
		return err
	}
	return r.emitf(g, versionJSON{Version: r.o.Version, Go: runtime.Version()}, "%s\n", cliconf.VersionLine("timerctl", r.o.Version))
}

// versionJSON is `timerctl version -o json`.
type versionJSON struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}
