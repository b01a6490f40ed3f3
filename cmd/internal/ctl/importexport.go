package ctl

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/strictjson"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// importBatch is how many timers go into one ScheduleBatch: one script call,
// which keeps Redis responsive between batches.
const importBatch = 500

// maxImportLine bounds one JSON line: a 1 MiB payload in base64 plus room.
const maxImportLine = 2 << 20

// importLine is one line of import's input. A line with a state is a
// timer as export wrote it, restored as it was (queue.Restore); a line
// without one is a new timer to schedule (queue.ScheduleBatch).
type importLine struct {
	ID          string          `json:"id"`
	State       string          `json:"state,omitempty"`
	DueAt       json.RawMessage `json:"due_at,omitempty"` // TIME string (see timefmt.Parse)
	In          string          `json:"in,omitempty"`
	CreatedAt   json.RawMessage `json:"created_at,omitempty"`
	FiredAt     json.RawMessage `json:"fired_at,omitempty"`
	CancelledAt json.RawMessage `json:"cancelled_at,omitempty"`
	Payload     []byte          `json:"payload,omitempty"` // base64
	PayloadText *string         `json:"payload_text,omitempty"`
	// Owner, Labels and Epoch are a timer's (the epoch it was scheduled
	// under; for a new timer, the one to schedule under); Deadline is a
	// restored timer's, FireWithinMS and FireBy a new timer's.
	Owner        *string           `json:"owner,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Epoch        *uint64           `json:"epoch,omitempty"`
	Deadline     json.RawMessage   `json:"deadline,omitempty"`
	FireWithinMS *int64            `json:"fire_within_ms,omitempty"`
	FireBy       json.RawMessage   `json:"fire_by,omitempty"`
	// Debounce marks a debounce window's timer (export's debounceLine).
	Debounce *struct {
		DeadlineAt json.RawMessage `json:"deadline_at,omitempty"`
	} `json:"debounce,omitempty"`
}

// importItem is one parsed line: a timer to restore as it was, or a new one
// to schedule.
type importItem struct {
	restore bool
	timer   queue.Timer    // when restore
	sched   queue.NewTimer // otherwise
	// occurrenceOf is the schedule of a timer to restore whose ID has an
	// occurrence's form, "" for any other.
	occurrenceOf string
	// window is set for a debounce window's timer (a "debounce" line),
	// restored with its window instead of timer.
	window *queue.RestoredWindow
}

type importJSON struct {
	Created       int   `json:"created"`
	Existing      int   `json:"existing"`
	Rejected      int   `json:"rejected"`
	RejectedLines []int `json:"rejected_lines"`
	// Schedule lines ({"kind":"schedule"}) restored, or left as they were.
	SchedulesCreated  int `json:"schedules_created"`
	SchedulesExisting int `json:"schedules_existing"`
	// Quarantined lines ({"kind":"quarantined"}) put in the quarantine.
	Quarantined int `json:"quarantined"`
}

// lineTime reads the time field name of an import line; absent and null
// give the zero time and false. The time must be a JSON string: a JSON
// number is the ambiguous bare number, refused with both readings.
func lineTime(name string, raw json.RawMessage) (time.Time, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		if timefmt.IsBareNumber(string(raw)) {
			e := timefmt.BareNumber(string(raw), `"%ss"`, `"%sms"`)
			return time.Time{}, true, fmt.Errorf("%s %s %s: %s", name, raw, e.Problem, e.Fix)
		}
		return time.Time{}, true, fmt.Errorf("%s %s is not a time: %s, as a JSON string", name, raw, timefmt.Fix)
	}
	t, err := timefmt.Parse(s)
	if err != nil {
		e := err.(*timefmt.Error)
		if timefmt.IsBareNumber(s) {
			e = timefmt.BareNumber(s, `"%ss"`, `"%sms"`)
		}
		return time.Time{}, true, fmt.Errorf("%s %q %s: %s", name, s, e.Problem, e.Fix)
	}
	return t, true, nil
}

// parseLine validates one line fully, so that ScheduleBatch and Restore,
// which reject a whole batch for one bad timer, only ever see good ones.
func parseLine(b []byte, maxPayload int) (importItem, error) {
	// Before decoding: encoding/json turns invalid UTF-8 and a lone
	// surrogate escape into U+FFFD, so an ID would be imported changed.
	if err := strictUTF8(b); err != nil {
		return importItem{}, err
	}
	var l importLine
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt "due" should not pass silently
	if err := dec.Decode(&l); err != nil {
		if _, ok := errors.AsType[base64.CorruptInputError](err); ok {
			return importItem{}, fmt.Errorf(`"payload" is not base64 (%v): "payload" takes the bytes in base64, as export writes them, and "payload_text" takes text as it is; rename the field, or encode the payload`, err)
		}
		return importItem{}, fmt.Errorf("not a JSON object of id, state, due_at or in, created_at, fired_at, cancelled_at, payload or payload_text, owner, epoch, labels, deadline, fire_within_ms or fire_by: %v", err)
	}
	if dec.More() {
		return importItem{}, errors.New("more than one JSON value on the line")
	}
	if err := queue.ValidateID(l.ID); err != nil {
		return importItem{}, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "timerq: "))
	}
	payload := l.Payload
	if l.PayloadText != nil {
		if l.Payload != nil {
			return importItem{}, errors.New("both payload and payload_text are given; give one")
		}
		payload = []byte(*l.PayloadText)
	}
	if len(payload) > maxPayload {
		return importItem{}, fmt.Errorf("the payload is %d bytes, over the limit of %d", len(payload), maxPayload)
	}
	owner, labels, err := lineOwner(l)
	if err != nil {
		return importItem{}, err
	}
	var times [4]time.Time
	var given [4]bool
	for i, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"due_at", l.DueAt}, {"created_at", l.CreatedAt}, {"fired_at", l.FiredAt}, {"cancelled_at", l.CancelledAt}} {
		var err error
		if times[i], given[i], err = lineTime(f.name, f.raw); err != nil {
			return importItem{}, err
		}
	}
	if l.Debounce != nil && l.State == "" {
		return importItem{}, errors.New(`"debounce" marks a debounce window's timer as export writes it, with its state; give the state, or drop "debounce" for a new timer`)
	}
	if l.State == "" {
		if sid, ms, ok := keyspace.SplitOccurrence(l.ID); ok {
			return importItem{}, fmt.Errorf("id %q has the form <schedule ID>@<Unix ms>, which is reserved for occurrences of recurring schedules (this one of %q): give the timer another ID, e.g. %q",
				l.ID, sid, sid+"-"+ms)
		}
		it, err := scheduleItem(l, times[0], given, payload)
		if err == nil {
			err = newTimerMetaOf(l, &it.sched, owner, labels)
		}
		return it, err
	}
	st, err := queue.ParseState(l.State)
	if err != nil {
		return importItem{}, fmt.Errorf("state %q is not scheduled, fired or cancelled", l.State)
	}
	t := queue.Timer{ID: l.ID, State: st, Due: times[0], CreatedAt: times[1], FiredAt: times[2],
		CancelledAt: times[3], Payload: payload, Owner: owner, Labels: labels}
	if l.Epoch != nil {
		t.Epoch = *l.Epoch
	}
	switch {
	case l.FireWithinMS != nil || len(l.FireBy) > 0:
		return importItem{}, errors.New(`fire_within_ms and fire_by set a new timer's deadline; a timer with a state has its "deadline", as export writes it`)
	case t.Epoch != 0 && owner == "":
		return importItem{}, errors.New("epoch is given without owner: an epoch is an owner's")
	}
	if t.Deadline, _, err = lineTime("deadline", l.Deadline); err != nil {
		return importItem{}, err
	}
	switch {
	case l.In != "":
		return importItem{}, errors.New(`"in" is given with a state; a timer with a state is restored at its due_at, so drop "in"`)
	case !given[0] || !given[1]:
		return importItem{}, fmt.Errorf("a %s timer needs due_at and created_at, as export writes them", st)
	case given[2] != (st == queue.StateFired):
		return importItem{}, fmt.Errorf("fired_at is given with state %s, or missing: only a fired timer has one", st)
	case given[3] != (st == queue.StateCancelled):
		return importItem{}, fmt.Errorf("cancelled_at is given with state %s, or missing: only a cancelled timer has one", st)
	}
	sid, _, _ := keyspace.SplitOccurrence(t.ID)
	if l.Debounce != nil {
		if sid == "" {
			return importItem{}, fmt.Errorf(`"debounce" is given for id %q, which is no debounce window's timer ID (<key>@<Unix ms>); drop "debounce"`, l.ID)
		}
		deadline, _, err := lineTime("debounce.deadline_at", l.Debounce.DeadlineAt)
		if err != nil {
			return importItem{}, err
		}
		return importItem{restore: true, timer: t, window: &queue.RestoredWindow{Timer: t, Deadline: deadline}}, nil
	}
	return importItem{restore: true, timer: t, occurrenceOf: sid}, nil
}

// lineOwner reads and checks a line's owner and labels.
func lineOwner(l importLine) (string, map[string]string, error) {
	owner := ""
	if l.Owner != nil {
		owner = *l.Owner
		if err := queue.ValidateOwner(owner); err != nil {
			return "", nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "timerq: invalid options: "))
		}
	}
	if err := queue.ValidateLabels(l.Labels); err != nil {
		return "", nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "timerq: invalid options: "))
	}
	if len(l.Labels) == 0 {
		return owner, nil, nil
	}
	return owner, l.Labels, nil
}

// newTimerMetaOf sets a new timer's owner, labels, expected epoch and
// deadline from its line, checked as ScheduleBatch checks them (one bad
// timer would refuse the whole batch).
func newTimerMetaOf(l importLine, t *queue.NewTimer, owner string, labels map[string]string) error {
	t.Owner, t.Labels = owner, labels
	if l.Epoch != nil {
		if owner == "" {
			return errors.New("epoch is given without owner: an epoch is an owner's")
		}
		t.Epoch = *l.Epoch
	}
	if len(l.Deadline) > 0 {
		return errors.New(`"deadline" is a restored timer's, with its state; a new timer takes fire_within_ms or fire_by`)
	}
	fireBy, given, err := lineTime("fire_by", l.FireBy)
	switch {
	case err != nil:
		return err
	case given && l.FireWithinMS != nil:
		return errors.New("both fire_within_ms and fire_by are given; give one")
	case l.FireWithinMS != nil:
		const most = int64(math.MaxInt64 / int64(time.Millisecond))
		if ms := *l.FireWithinMS; ms <= 0 || ms > most {
			return fmt.Errorf("fire_within_ms %d is outside 1..%d: give how many milliseconds after its due time the fire may still be delivered, or leave it out", ms, most)
		}
		t.FireWithin = time.Duration(*l.FireWithinMS) * time.Millisecond
	case given:
		if l.In == "" && fireBy.Before(t.Due) {
			return fmt.Errorf("fire_by %s is before due_at: the timer could never be delivered", timefmt.Format(fireBy))
		}
		t.FireBy = fireBy
	}
	return nil
}

// scheduleItem is a line without a state: a new timer, due at due_at or in
// "in" from the Redis server's clock.
func scheduleItem(l importLine, dueAt time.Time, given [4]bool, payload []byte) (importItem, error) {
	if given[1] || given[2] || given[3] {
		return importItem{}, errors.New("created_at, fired_at and cancelled_at need a state (scheduled, fired or cancelled), as export writes it")
	}
	t := queue.NewTimer{ID: l.ID, Due: dueAt, Payload: payload}
	switch {
	case given[0] && l.In != "":
		return importItem{}, errors.New("both due_at and in are given; give one")
	case given[0]:
	case l.In != "":
		d, e := parseDelay(l.In)
		if e != nil {
			return importItem{}, fmt.Errorf("in %q %s: %s", l.In, e.Problem, e.Fix)
		}
		t = queue.NewTimerIn(l.ID, d, payload)
	default:
		return importItem{}, errors.New("no due time: give due_at or in")
	}
	return importItem{sched: t}, nil
}

func (r *runner) importCmd(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageErr(fmt.Sprintf("too many arguments: %q", c.Args().Slice()), helpFix(c))
	}
	return r.importFile(c, c.Args().First(), "")
}

// importFile imports path, or stdin for "" and "-". only, if not "", is
// the kind every line is read as (schedules import: kindSchedule).
func (r *runner) importFile(c *cli.Context, path, only string) error {
	in, size := r.o.Stdin, int64(0)
	if path != "" && path != "-" {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return usageErr(fmt.Sprintf("import file %q does not exist", path), "check the path, or use - to read stdin")
		}
		if err != nil {
			return &Error{Code: ExitFailure, Problem: err.Error(), Fix: "check the file's permissions", Err: err}
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		in = f
	}
	s, err := r.open(c)
	if err != nil {
		return err
	}
	defer s.close()

	im := &importer{r: r, c: c, s: s, only: only, bar: r.progress(size), maxPay: s.q.Options().MaxPayloadBytes,
		occs: map[string][]pendingOcc{}}
	im.res.RejectedLines = []int{}
	defer im.bar.done() // on every early return; done twice is done once
	rd := bufio.NewReaderSize(in, 64<<10)
	for {
		b, err := readLine(rd, maxImportLine)
		im.read += int64(len(b))
		if len(b) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF && !errors.Is(err, errLineTooLong) {
			return &Error{Code: ExitFailure, Problem: fmt.Sprintf("reading line %d: %v", im.lineNo+1, err),
				Fix: fmt.Sprintf("lines before it were imported (%d created, %d existing); fix the input and import again, which is idempotent", im.res.Created, im.res.Existing), Err: err}
		}
		im.lineNo++
		if line := bytes.TrimSpace(b); len(line) > 0 {
			if err := im.add(line, err); err != nil {
				return err
			}
		}
		if len(im.batch)+len(im.restores) >= importBatch {
			if err := im.flush(); err != nil {
				return err
			}
		}
		if err == io.EOF {
			break
		}
	}
	if err := im.flush(); err != nil {
		return err
	}
	if err := im.restoreOrphans(); err != nil {
		return err
	}
	res := im.res
	slices.Sort(res.RejectedLines)
	im.bar.update(im.read, im.lineNo)
	im.bar.done()
	if only == kindSchedule {
		err = r.emitf(s.g, map[string]int{"created": res.SchedulesCreated, "existing": res.SchedulesExisting, "rejected": res.Rejected}, "schedules: %d created, %d already existed, %d rejected\n", res.SchedulesCreated, res.SchedulesExisting, res.Rejected)
	} else {
		err = r.emitImport(s.g, res)
	}
	if err == nil && res.Rejected > 0 {
		return errRejected
	}
	return err
}

// emitImport prints import's counts.
func (r *runner) emitImport(g global, res importJSON) error {
	return r.emit(g, res, func(w io.Writer) error {
		fmt.Fprintf(w, "created %d, existing %d, rejected %d", res.Created, res.Existing, res.Rejected)
		if res.SchedulesCreated+res.SchedulesExisting > 0 {
			fmt.Fprintf(w, "; schedules: %d created, %d existing", res.SchedulesCreated, res.SchedulesExisting)
		}
		if res.Quarantined > 0 {
			fmt.Fprintf(w, "; %d records put in the quarantine (timerctl quarantine list)", res.Quarantined)
		}
		_, err := fmt.Fprintln(w)
		return err
	})
}

// importer is one run of timerctl import. Lines go to Redis in batches of
// one kind, in the order they came, so that the first line of an ID wins,
// as it would one line at a time.
type importer struct {
	r    *runner
	c    *cli.Context
	s    *session
	bar  *progressBar
	only string // the kind of every line, if not ""

	maxPay   int
	res      importJSON
	batch    []queue.NewTimer
	restores []queue.Timer
	// Occurrence lines (an ID "<schedule>@<ms>" with a state) wait for
	// their schedule's line, which export writes after every timer:
	// queue.Restore refuses them while their schedule does not exist, so
	// that a line cannot plant an occurrence for a later schedule.
	occs   map[string][]pendingOcc
	read   int64 // bytes read so far
	lineNo int
}

// add takes one non-empty line, read with readErr (nil, io.EOF or
// errLineTooLong). A bad line is rejected and counted; the error returned
// is one that stops the import (Redis refused or failed).
func (im *importer) add(line []byte, readErr error) error {
	kind, err := readKind(line, readErr, im.only)
	if err != nil {
		im.reject(im.lineNo, cliconf.OneLine(err.Error()))
		return nil
	}
	switch kind {
	case kindQuarantined:
		return im.addQuarantined(line)
	case kindSchedule:
		return im.addSchedule(line)
	}
	it, err := parseLine(line, im.maxPay)
	if err != nil {
		im.reject(im.lineNo, cliconf.OneLine(err.Error()))
		return nil
	}
	return im.addTimer(it)
}

// readKind returns the kind of a line read with readErr (only, if not
// ""), or why the line cannot be read: too long, not UTF-8, or of an
// unknown kind.
func readKind(line []byte, readErr error, only string) (string, error) {
	if readErr != nil && readErr != io.EOF {
		return "", readErr
	}
	// Schedule lines too: their IDs would be changed the same way.
	if err := strictUTF8(line); err != nil || only != "" {
		return only, err
	}
	return lineKind(line)
}

// addQuarantined puts a quarantined line back in the quarantine.
func (im *importer) addQuarantined(line []byte) error {
	qr, err := parseQuarantineLine(line)
	if err != nil {
		im.reject(im.lineNo, cliconf.OneLine(err.Error()))
		return nil
	}
	ctx, cancel := im.s.ctx(im.c)
	n, err := im.s.q.Quarantine().Restore(ctx, []queue.QuarantinedRecord{qr})
	cancel()
	if err != nil && !errors.Is(err, queue.ErrInvalidOptions) && !errors.Is(err, queue.ErrInvalidID) {
		return im.s.redisErr(err)
	}
	im.res.Quarantined += n
	if err != nil {
		im.reject(im.lineNo, cliconf.OneLine(err.Error()))
	}
	return nil
}

// addSchedule restores a schedule line, with the occurrence lines that
// waited for it.
func (im *importer) addSchedule(line []byte) error {
	// After the timers before it, which may be its occurrences (export
	// writes timers first): the restore keeps them.
	if err := im.flush(); err != nil {
		return err
	}
	info, err := parseScheduleLine(line)
	if err != nil {
		// A line that does not parse is rejected, as a timer line is.
		im.reject(im.lineNo, cliconf.OneLine(err.Error()))
		return nil
	}
	switch err := restoreSchedule(im.c, im.s, info, im.occs[info.ID], &im.res); {
	case err == nil:
		delete(im.occs, info.ID)
	case isBadInput(err):
		im.reject(im.lineNo, cliconf.OneLine(err.Error()))
	default:
		return im.s.redisErr(err)
	}
	return nil
}

// addTimer batches a timer line: a new timer or a restore, each batch of
// one kind; a debounce window goes alone, and an occurrence waits for its
// schedule's line.
func (im *importer) addTimer(it importItem) error {
	switch {
	case it.window != nil:
		return im.addWindow(*it.window)
	case it.restore && it.occurrenceOf != "":
		im.occs[it.occurrenceOf] = append(im.occs[it.occurrenceOf], pendingOcc{line: im.lineNo, timer: it.timer})
	case it.restore:
		if len(im.batch) > 0 {
			if err := im.flush(); err != nil {
				return err
			}
		}
		im.restores = append(im.restores, it.timer)
	default:
		if len(im.restores) > 0 {
			if err := im.flush(); err != nil {
				return err
			}
		}
		im.batch = append(im.batch, it.sched)
	}
	return nil
}

// addWindow restores a debounce window: one script call, after the lines
// before it.
func (im *importer) addWindow(w queue.RestoredWindow) error {
	if err := im.flush(); err != nil {
		return err
	}
	ctx, cancel := im.s.ctx(im.c)
	res, err := im.s.q.RestoreDebounce(ctx, w)
	cancel()
	switch {
	case err == nil:
		countResults([]queue.ScheduleResult{res}, &im.res)
	case isBadInput(err):
		im.reject(im.lineNo, cliconf.OneLine(err.Error()))
	default:
		return im.s.redisErr(err)
	}
	return nil
}

// reject counts line as rejected and says why on stderr.
func (im *importer) reject(line int, msg string) {
	im.res.Rejected++
	im.res.RejectedLines = append(im.res.RejectedLines, line)
	im.bar.clear()
	fmt.Fprintf(im.r.o.Stderr, "timerctl: line %d: %s: fix the line and import again\n", line, msg)
}

// flush sends the pending batch (schedules or restores) to Redis.
func (im *importer) flush() error {
	if len(im.batch) == 0 && len(im.restores) == 0 {
		return nil
	}
	ctx, cancel := im.s.ctx(im.c)
	defer cancel()
	var out []queue.ScheduleResult
	var err error
	if len(im.restores) > 0 {
		out, err = im.s.q.Restore(ctx, im.restores)
	} else {
		out, err = im.s.q.ScheduleBatch(ctx, im.batch)
	}
	if err != nil {
		return im.s.redisErr(err)
	}
	countResults(out, &im.res)
	im.batch, im.restores = im.batch[:0], im.restores[:0]
	im.bar.update(im.read, im.lineNo)
	return nil
}

// strictUTF8 refuses a line that is not valid UTF-8, or whose strings hold
// a \u escape of a lone UTF-16 surrogate, which JSON decoders replace with
// U+FFFD: the ID (or payload_text) would be imported as another one. The
// HTTP API refuses such a body with the same check (internal/strictjson).
func strictUTF8(b []byte) error {
	const fix = "JSON lines must be UTF-8, and timer IDs are UTF-8 text; give binary data as base64 in \"payload\""
	var te *strictjson.TextError
	if err := strictjson.CheckText(b); errors.As(err, &te) {
		return fmt.Errorf("the line %s; %s", te.Problem, fix)
	}
	return nil
}

var errLineTooLong = fmt.Errorf("the line is over %d bytes", maxImportLine)

// readLine reads one line without its newline. A line over max bytes is
// consumed and reported as errLineTooLong, so that the next line still
// parses.
func readLine(rd *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := rd.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			if len(line) > max {
				tooLong, line = true, line[:0:0]
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			// A non-empty placeholder, so that the caller counts the line.
			if err == nil || err == io.EOF {
				return []byte{'x'}, errLineTooLong
			}
			return nil, err
		}
		return bytes.TrimSuffix(line, []byte{'\n'}), err
	}
}

// pendingOcc is an occurrence line of an import waiting for its schedule.
type pendingOcc struct {
	line  int
	timer queue.Timer
}

func timersOf(occs []pendingOcc) []queue.Timer {
	return mapList(occs, func(o pendingOcc) queue.Timer { return o.timer })
}

// restoreSchedule restores one schedule line of an import, with the
// occurrence lines of it read before.
func restoreSchedule(c *cli.Context, s *session, info queue.RecurringInfo, occs []pendingOcc, res *importJSON) error {
	ctx, cancel := s.ctx(c)
	defer cancel()
	created, out, err := s.q.Recurring().RestoreWith(ctx, info, timersOf(occs))
	countResults(out, res)
	if err != nil {
		return err
	}
	if created {
		res.SchedulesCreated++
	} else {
		res.SchedulesExisting++
	}
	return nil
}

func countResults(out []queue.ScheduleResult, res *importJSON) {
	for _, o := range out {
		if o.Created {
			res.Created++
		} else {
			res.Existing++
		}
	}
}

// restoreOrphans restores, at the end of an import, the occurrence lines
// whose schedule had no line: Restore takes them if the namespace holds
// the schedule (an import of a filtered export), and each is rejected
// otherwise, by line.
func (im *importer) restoreOrphans() error {
	occs := im.occs
	ids := slices.Collect(maps.Keys(occs))
	slices.SortFunc(ids, func(a, b string) int { return occs[a][0].line - occs[b][0].line })
	for _, sid := range ids {
		group := occs[sid]
		for start := 0; start < len(group); start += importBatch {
			chunk := group[start:min(start+importBatch, len(group))]
			ctx, cancel := im.s.ctx(im.c)
			out, err := im.s.q.Restore(ctx, timersOf(chunk))
			cancel()
			if errors.Is(err, queue.ErrOccurrenceID) {
				for _, o := range chunk {
					im.reject(o.line, fmt.Sprintf("timer %q is an occurrence of schedule %q (its ID has the form <schedule ID>@<Unix ms>, which is reserved for occurrences), "+
						"and neither this input nor the namespace holds that schedule; import it with the schedule's line (a full export writes both), or give a plain timer another ID", o.timer.ID, sid))
				}
				continue
			}
			if err != nil {
				return im.s.redisErr(err)
			}
			countResults(out, &im.res)
		}
	}
	return nil
}

func (r *runner) export(c *cli.Context) error {
	// A filtered export is of timers only; a full one carries the
	// schedules too, after the timers (so that import restores their
	// occurrences first, with their own created times).
	withSchedules := !c.IsSet("state") && !c.IsSet("due-from") && !c.IsSet("due-to")
	o, err := listOptions(c)
	if err != nil {
		return err
	}
	o.Limit = queue.MaxBatch
	s, err := r.open(c)
	if err != nil {
		return err
	}
	defer s.close()
	w := bufio.NewWriter(r.o.Stdout)
	enc := json.NewEncoder(w)
	// Records timerq cannot read are skipped by the listing; export keeps
	// them, as quarantined lines after the timers, so that a round trip
	// loses nothing and an operator sees them (stderr).
	var bad []quarantineLine
	skipped := 0
	// Keys of IDs "<key>@<ms>" that are recurring schedules: the other
	// timers of that form are debounce windows' (see windowOf).
	schedules := map[string]bool{}
	for {
		ctx, cancel := s.ctx(c)
		page, err := s.q.List(ctx, o)
		cancel()
		if err != nil {
			return s.redisErr(err)
		}
		for _, t := range page.Timers {
			// No API writes such an ID (queue.ValidateID); a record written
			// by hand might, and JSON would turn its bad bytes into U+FFFD,
			// so that import would create another ID. Skipped, and said.
			if !utf8.ValidString(t.ID) {
				skipped++
				fmt.Fprintf(r.o.Stderr, "timerctl: timer %q has an ID that is not valid UTF-8, which JSON cannot carry: not exported; "+
					"it was written outside timerq (no API takes such an ID); re-create it under a UTF-8 ID and remove the record (docs/redis-layout.md names the keys)\n", t.ID)
				continue
			}
			l := toExportLine(t)
			if l.Debounce, err = windowOf(c, s, schedules, t); err != nil {
				return err
			}
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		for _, m := range page.Malformed {
			bad = append(bad, malformedLine(m))
		}
		if page.NextCursor == "" {
			break
		}
		o.Cursor = page.NextCursor
	}
	if withSchedules {
		ctx, cancel := s.ctx(c)
		qs, err := s.q.Quarantine().List(ctx)
		cancel()
		if err != nil {
			return s.redisErr(err)
		}
		for _, q := range qs {
			l := toQuarantineLine(q)
			l.Kind = kindQuarantined
			bad = append(bad, l)
		}
	}
	for _, l := range bad {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(r.o.Stderr, "timerctl: warning: %d records timerq cannot read (quarantined, or malformed in place) "+
			"are exported as {\"kind\":\"quarantined\"} lines; import puts them in the quarantine and never fires them "+
			"(timerctl quarantine list)\n", len(bad))
	}
	if withSchedules {
		if err := writeSchedules(c, s, w); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return &Error{Code: ExitFailure, Problem: fmt.Sprintf("writing the export: %v", err), Fix: "check the output's destination", Err: err}
	}
	if skipped > 0 {
		return &Error{Code: ExitFailure, Problem: fmt.Sprintf("%d timers were not exported: their IDs are not valid UTF-8", skipped),
			Fix: "the lines above name them; every other timer was exported"}
	}
	return nil
}

// exportLine is one timer as export writes it: every field, so that import
// restores it as it was. The payload is always present, so that an empty
// one reads "" rather than vanishing; only a settled timer has its settled
// time.
type exportLine struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	DueAt       string  `json:"due_at"`
	CreatedAt   string  `json:"created_at"`
	FiredAt     *string `json:"fired_at,omitempty"`
	CancelledAt *string `json:"cancelled_at,omitempty"`
	Payload     []byte  `json:"payload"` // base64: any bytes survive
	// MetaJSON is the timer's owner, the epoch it was scheduled under, its
	// labels and its deadline, each only when it has them (the API's).
	api.MetaJSON
	// Debounce marks a debounce window's timer, which import restores with
	// its window (queue.RestoreDebounce) although no schedule of its ID's
	// "<key>@" exists.
	Debounce *debounceLine `json:"debounce,omitempty"`
}

// debounceLine is what export writes of a debounce window.
type debounceLine struct {
	// DeadlineAt is the window's deadline while it is open and t its timer.
	DeadlineAt *string `json:"deadline_at,omitempty"`
}

// windowOf says whether export's timer t is a debounce window's timer, and
// its window's deadline, caching in schedules the keys that are schedules.
func windowOf(c *cli.Context, s *session, schedules map[string]bool, t queue.Timer) (*debounceLine, error) {
	key, _, ok := keyspace.SplitOccurrence(t.ID)
	if !ok || schedules[key] {
		return nil, nil
	}
	ctx, cancel := s.ctx(c)
	w, ok, err := s.q.Inspect().DebounceWindowOf(ctx, t.ID)
	cancel()
	if err != nil {
		return nil, s.redisErr(err)
	}
	if !ok {
		schedules[key] = true
		return nil, nil
	}
	l := &debounceLine{}
	if t.State == queue.StateScheduled {
		d := timefmt.FormatExact(w.Deadline) // read back: keep its µs
		l.DeadlineAt = &d
	}
	return l, nil
}

func toExportLine(t queue.Timer) exportLine {
	// The due time keeps its microseconds, which a scheduled timer may
	// have: truncated to the ms, the restored timer would fire early.
	return exportLine{ID: t.ID, State: string(t.State), DueAt: timefmt.FormatExact(t.Due), CreatedAt: timefmt.Format(t.CreatedAt),
		FiredAt: optTime(t.FiredAt), CancelledAt: optTime(t.CancelledAt), Payload: api.WireBytes(t.Payload),
		MetaJSON: api.ToMetaJSON(t.Owner, t.Epoch, t.Labels, t.Deadline)}
}

// progressBar draws import's progress on stderr when it is a terminal and
// does nothing otherwise.
type progressBar struct {
	r     *runner
	on    bool
	total int64 // bytes, 0 when unknown (stdin)
	drawn bool
}

func (r *runner) progress(total int64) *progressBar {
	return &progressBar{r: r, on: r.o.IsTerminal(r.o.Stderr), total: total}
}

func (b *progressBar) update(read int64, lines int) {
	if !b.on {
		return
	}
	const width = 30
	if b.total > 0 {
		done := int(min(read, b.total) * width / b.total)
		fmt.Fprintf(b.r.o.Stderr, "\r[%s%s] %3d%% %d lines", strings.Repeat("=", done), strings.Repeat(" ", width-done),
			min(read, b.total)*100/b.total, lines)
	} else {
		fmt.Fprintf(b.r.o.Stderr, "\r%d lines", lines)
	}
	b.drawn = true
}

// clear erases the bar so that a message can take its line.
func (b *progressBar) clear() {
	if b.on && b.drawn {
		fmt.Fprint(b.r.o.Stderr, "\r\033[K")
		b.drawn = false
	}
}

func (b *progressBar) done() {
	if b.on && b.drawn {
		fmt.Fprintln(b.r.o.Stderr)
		b.drawn = false
	}
}
