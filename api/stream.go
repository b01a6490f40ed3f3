package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/httpstream"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// FireEventJSON is one fire, the data of an event of type fire in
// GET /v1/namespaces/{ns}/fires.
type FireEventJSON struct {
	ID       string `json:"id"`
	DueAt    string `json:"due_at"`
	FiredAt  string `json:"fired_at"`
	Payload  []byte `json:"payload"`
	Shard    int    `json:"shard"`
	StreamID string `json:"stream_id"`
	// MetaJSON is the timer's owner and the epoch it was scheduled under
	// (a fencing token: an executor that bumped the owner's epoch since
	// refuses the fire), its labels and its deadline.
	MetaJSON
}

// ToFireEventJSON is ev as the fire stream, and `timerctl watch -o json`,
// show it.
func ToFireEventJSON(ev queue.Event) FireEventJSON {
	return FireEventJSON{ID: ev.ID, DueAt: timefmt.Format(ev.Due), FiredAt: timefmt.Format(ev.FiredAt),
		Payload: WireBytes(ev.Payload), Shard: ev.Shard, StreamID: ev.StreamID,
		MetaJSON: ToMetaJSON(ev.Owner, ev.Epoch, ev.Labels, ev.Deadline)}
}

// streamCursor matches a position in the fire streams: one stream entry
// ID per shard, joined by commas (queue.ReadFires), which checks it
// against the shard count.
var streamCursor = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?(,[0-9]{1,20}(-[0-9]{1,20})?)*$`)

// keepAlive is how long a stream with nothing to send waits before it
// writes a comment, so that a gone client (or a proxy's idle timeout) is
// noticed this soon.
const keepAlive = 15 * time.Second

// streamFires streams fire events of every shard as Server-Sent Events.
// Each event's id is the cursor just after it, so a client that reconnects
// with Last-Event-ID resumes with nothing skipped or repeated.
func (h *Handler) streamFires(w http.ResponseWriter, r *http.Request) {
	if err := h.serve(w, r, func(q *queue.Queue) (any, error) { return nil, h.stream(w, r, q) }); err != nil {
		h.fail(w, r, err)
	}
}

// stream checks r's cursor and streams; an error it returns is answered
// as a problem, before the stream starts.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, q *queue.Queue) error {
	v, err := query(r, "after")
	if err != nil {
		return err
	}
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = v.Get("after")
	}
	if after != "" && (len(after) > queue.MaxShards*42 || !streamCursor.MatchString(after)) {
		return badRequest("", "cursor %q is not a fire stream cursor; pass an event's id as Last-Event-ID, or after=0 to start at the oldest fire", after)
	}
	done, err := h.held.Acquire(r)
	if err != nil {
		return err
	}
	defer done()
	// A bad cursor (say, for another shard count) fails now, as a problem,
	// rather than as a stream of them.
	vctx, cancel := h.ctx(r)
	if after == "" {
		_, after, err = q.Inspect().RecentFires(vctx, 1)
	} else {
		_, err = q.ReadFires(vctx, queue.ReadFiresOptions{Limit: 1, Cursor: after})
	}
	cancel()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	st := httpstream.Start(w, h.opts.StreamWriteTimeout)
	if st.Send([]byte(": timerq fires\nretry: 2000\n\n")) != nil {
		return nil
	}
	st.Poll(r.Context(), httpstream.Poll{
		Every:     h.opts.StreamPoll,
		KeepAlive: keepAlive,
		// Redis is failing: say so every few seconds, not every poll.
		Backoff: h.opts.RetryAfter,
		Next: func(ctx context.Context, buf *bytes.Buffer) (bool, error) {
			rctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
			defer cancel()
			page, err := q.ReadFires(rctx, queue.ReadFiresOptions{Limit: queue.MaxBatch, Cursor: after})
			if err != nil {
				return false, err
			}
			writeEvents(buf, page.Events, after, page.NextCursor)
			if len(page.Events) > 0 {
				after = page.NextCursor
			}
			return len(page.Events) == queue.MaxBatch, nil
		},
		Problem: func(buf *bytes.Buffer, err error) {
			h.log.Warn("timerq api: reading the fire streams failed", "namespace", q.Namespace(), "err", err)
			p, _ := h.problemOf(err, q.Namespace())
			data, _ := json.Marshal(p)
			fmt.Fprintf(buf, "event: problem\ndata: %s\n\n", data)
		},
	})
	return nil
}

// writeEvents writes evs, read after the cursor after up to next, each
// with the cursor just after it as its id: the cursor's position for the
// event's shard moves to the event. When the cursors' shapes do not allow
// that, only the last event carries an id (next), and a client that
// reconnects in the middle of the batch sees the rest of it again.
func writeEvents(buf *bytes.Buffer, evs []queue.Event, after, next string) {
	pos := strings.Split(after, ",")
	n := strings.Count(next, ",") + 1
	if len(pos) == 1 && n > 1 {
		for range n - 1 {
			pos = append(pos, pos[0])
		}
	}
	perEvent := len(pos) == n
	for i, ev := range evs {
		if perEvent && ev.Shard >= 0 && ev.Shard < n {
			pos[ev.Shard] = ev.StreamID
			fmt.Fprintf(buf, "id: %s\n", strings.Join(pos, ","))
		} else if i == len(evs)-1 {
			fmt.Fprintf(buf, "id: %s\n", next)
		}
		data, _ := json.Marshal(ToFireEventJSON(ev))
		fmt.Fprintf(buf, "event: fire\ndata: %s\n\n", data)
	}
}
