package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
)

// sse reads Server-Sent Events from one response.
type sse struct {
	t      *testing.T
	res    *http.Response
	cancel context.CancelFunc
	lines  *bufio.Scanner
}

type sseEvent struct {
	id, event, data string
}

func (e *env) openStream(lastEventID, query string) *sse {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", e.url("/fires"+query), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := e.client.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		e.t.Fatalf("stream = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sse{t: e.t, res: res, cancel: cancel, lines: bufio.NewScanner(res.Body)}
	e.t.Cleanup(s.close)
	return s
}

func (s *sse) close() {
	s.cancel()
	s.res.Body.Close()
}

// next returns the next event, skipping comments and the retry field.
func (s *sse) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "":
			if ev.event != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		default:
			s.t.Fatalf("unexpected line %q", line)
		}
	}
	s.t.Fatalf("the stream ended: %v", s.lines.Err())
	return ev
}

// fire reads the next event, which must be a fire, and returns its data.
func (s *sse) fire() (api.FireEventJSON, string) {
	s.t.Helper()
	ev := s.next()
	if ev.event != "fire" || ev.id == "" {
		s.t.Fatalf("event %+v, want a fire with an id", ev)
	}
	var f api.FireEventJSON
	if err := json.Unmarshal([]byte(ev.data), &f); err != nil {
		s.t.Fatal(err)
	}
	return f, ev.id
}

// TestStreamFiresResumes: the stream carries the fires of every shard, and
// a client that reconnects with the last event's id gets every later fire
// once, none it already had.
func TestStreamFiresResumes(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, api.Options{StreamPoll: 10 * time.Millisecond})
		ctx := context.Background()
		// One fire before the stream opens: a stream without a cursor
		// starts at the newest fire, after it.
		create := func(ids ...string) {
			var batch []map[string]any
			for _, id := range ids {
				batch = append(batch, map[string]any{"id": id, "in": "0s", "payload_text": "p-" + id})
			}
			if r := e.do(ctx, "POST", e.url("/timers/batch"), map[string]any{"timers": batch}); r.Status != http.StatusOK {
				t.Fatal(r.Status, string(r.Body))
			}
			redistest.AwaitServerTime(t, b.Client, time.Now().Add(time.Millisecond))
			if n := len(e.claimAll()); n != len(ids) {
				t.Fatalf("claimed %d, want %d", n, len(ids))
			}
		}
		create("before")
		s := e.openStream("", "")
		var first []string
		for i := range 12 {
			first = append(first, fmt.Sprint("a", i))
		}
		create(first...)
		shards := map[int]bool{}
		var got []string
		var lastID string
		for range 5 {
			f, id := s.fire()
			if string(f.Payload) != "p-"+f.ID || f.DueAt == "" || f.FiredAt == "" || f.StreamID == "" {
				t.Fatalf("fire event %+v", f)
			}
			got, lastID = append(got, f.ID), id
			shards[f.Shard] = true
		}
		s.close()

		var second []string
		for i := range 12 {
			second = append(second, fmt.Sprint("b", i))
		}
		create(second...)
		s2 := e.openStream(lastID, "")
		for range len(first) + len(second) - 5 {
			f, _ := s2.fire()
			got = append(got, f.ID)
			shards[f.Shard] = true
		}
		want := append(append([]string{}, first...), second...)
		sort.Strings(want)
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("the two streams carried\n%v\nwant every fire once\n%v", got, want)
		}
		if b.Shards > 1 && len(shards) < 4 {
			t.Fatalf("fires came from shards %v only", shards)
		}

		// after=0 replays from the oldest fire kept, "before" included.
		s3 := e.openStream("", "?after=0")
		if f, _ := s3.fire(); f.ID != "before" && b.Shards <= 1 {
			t.Fatalf("after=0 began with %s, want before", f.ID)
		}

		r := e.do(ctx, "GET", e.url("/fires?after=nonsense"), nil)
		if r.Status != http.StatusBadRequest {
			t.Fatalf("a bad cursor = %d %s", r.Status, r.Body)
		}
	})
}
