package ctl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/queue"
)

// importBatch is how many timers go into one ScheduleBatch: one script call,
// which keeps Redis responsive between batches.
const importBatch = 500

// maxImportLine bounds one JSON line: a 1 MiB payload in base64 plus room.
const maxImportLine = 2 << 20

// importLine is one line of import's input.
type importLine struct {
	ID          string          `json:"id"`
	DueAt       json.RawMessage `json:"due_at,omitempty"` // RFC 3339 string or Unix ms number
	In          string          `json:"in,omitempty"`
	Payload     []byte          `json:"payload,omitempty"` // base64
	PayloadText *string         `json:"payload_text,omitempty"`
}

type importJSON struct {
	Created       int   `json:"created"`
	Existing      int   `json:"existing"`
	Rejected      int   `json:"rejected"`
	RejectedLines []int `json:"rejected_lines"`
}

// parseLine validates one line fully, so that ScheduleBatch, which rejects
// a whole batch for one bad timer, only ever sees good ones.
func parseLine(b []byte, now time.Time, maxPayload int) (queue.NewTimer, error) {
	var l importLine
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt "due" should not pass silently
	if err := dec.Decode(&l); err != nil {
		return queue.NewTimer{}, fmt.Errorf("not a JSON object of id, due_at or in, payload or payload_text: %v", err)
	}
	if dec.More() {
		return queue.NewTimer{}, errors.New("more than one JSON value on the line")
	}
	if err := queue.ValidateID(l.ID); err != nil {
		return queue.NewTimer{}, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "timerq: "))
	}
	t := queue.NewTimer{ID: l.ID, Payload: l.Payload}
	switch {
	case len(l.DueAt) > 0 && l.In != "":
		return t, errors.New("both due_at and in are given; give one")
	case len(l.DueAt) > 0:
		var s string
		if json.Unmarshal(l.DueAt, &s) != nil {
			s = string(l.DueAt) // a bare number of Unix ms
		}
		due, err := parseTime("due_at", s)
		if err != nil {
			return t, fmt.Errorf("due_at %s is not a time: use RFC 3339 or Unix milliseconds", l.DueAt)
		}
		t.Due = due
	case l.In != "":
		d, err := parseIn("in", l.In)
		if err != nil {
			return t, fmt.Errorf("in %q is not a non-negative duration: use Go's syntax, e.g. 90s or 5m", l.In)
		}
		t.Due = now.Add(d)
	default:
		return t, errors.New("no due time: give due_at or in")
	}
	if err := queue.ValidateDue(t.Due); err != nil {
		return t, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "timerq: "))
	}
	if l.PayloadText != nil {
		if l.Payload != nil {
			return t, errors.New("both payload and payload_text are given; give one")
		}
		t.Payload = []byte(*l.PayloadText)
	}
	if len(t.Payload) > maxPayload {
		return t, fmt.Errorf("the payload is %d bytes, over the limit of %d", len(t.Payload), maxPayload)
	}
	return t, nil
}

func (r *runner) importCmd(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageErr(fmt.Sprintf("too many arguments: %q", c.Args().Slice()), helpFix(c))
	}
	path := c.Args().First()
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

	var (
		res     importJSON
		batch   []queue.NewTimer
		read    int64
		lineNo  int
		bar     = r.progress(size)
		maxPay  = s.q.Options().MaxPayloadBytes
		rd      = bufio.NewReaderSize(in, 64<<10)
		flushed = func() error {
			if len(batch) == 0 {
				return nil
			}
			ctx, cancel := s.ctx(c)
			defer cancel()
			out, err := s.q.ScheduleBatch(ctx, batch)
			if err != nil {
				return s.redisErr(err)
			}
			for _, o := range out {
				if o.Created {
					res.Created++
				} else {
					res.Existing++
				}
			}
			batch = batch[:0]
			bar.update(read, lineNo)
			return nil
		}
	)
	res.RejectedLines = []int{}
	for {
		b, err := readLine(rd, maxImportLine)
		read += int64(len(b))
		if len(b) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF && !errors.Is(err, errLineTooLong) {
			bar.done()
			return &Error{Code: ExitFailure, Problem: fmt.Sprintf("reading line %d: %v", lineNo+1, err),
				Fix: fmt.Sprintf("lines before it were imported (%d created, %d existing); fix the input and import again, which is idempotent", res.Created, res.Existing), Err: err}
		}
		lineNo++
		if line := bytes.TrimSpace(b); len(line) > 0 {
			var t queue.NewTimer
			perr := err
			if perr == nil || perr == io.EOF {
				t, perr = parseLine(line, r.o.Now(), maxPay)
			}
			if perr != nil {
				res.Rejected++
				res.RejectedLines = append(res.RejectedLines, lineNo)
				bar.clear()
				fmt.Fprintf(r.o.Stderr, "timerctl: line %d: %s: fix the line and import again\n", lineNo, oneLine(perr.Error()))
			} else {
				batch = append(batch, t)
			}
		}
		if len(batch) >= importBatch {
			if err := flushed(); err != nil {
				bar.done()
				return err
			}
		}
		if err == io.EOF {
			break
		}
	}
	if err := flushed(); err != nil {
		bar.done()
		return err
	}
	bar.update(read, lineNo)
	bar.done()
	if s.g.json {
		if err := writeJSON(r.o.Stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(r.o.Stdout, "created %d, existing %d, rejected %d\n", res.Created, res.Existing, res.Rejected)
	}
	if res.Rejected > 0 {
		return errRejected
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

func (r *runner) export(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
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
	for {
		ctx, cancel := s.ctx(c)
		page, err := s.q.List(ctx, o)
		cancel()
		if err != nil {
			return s.redisErr(err)
		}
		for _, t := range page.Timers {
			due, _ := json.Marshal(fmtJSONTime(t.Due))
			p := t.Payload
			if p == nil {
				p = []byte{}
			}
			if err := enc.Encode(exportLine{ID: t.ID, DueAt: due, Payload: p}); err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			break
		}
		o.Cursor = page.NextCursor
	}
	if err := w.Flush(); err != nil {
		return &Error{Code: ExitFailure, Problem: fmt.Sprintf("writing the export: %v", err), Fix: "check the output's destination", Err: err}
	}
	return nil
}

// exportLine is importLine with the payload always present, so that an
// empty payload reads "" rather than vanishing.
type exportLine struct {
	ID      string          `json:"id"`
	DueAt   json.RawMessage `json:"due_at"`
	Payload []byte          `json:"payload"`
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
