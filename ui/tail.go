package ui

// The live tail of fires, a page and its event stream.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/timerq/timerq/internal/httpstream"
	"github.com/timerq/timerq/queue"
)

type tailData struct {
	Events []queue.Event
	After  string
}

func (h *Handler) tail(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	evs, cursor, err := h.q.Inspect().RecentFires(ctx, 20)
	if h.failed(w, r, err) {
		return
	}
	h.render(w, r, http.StatusOK, "tail", "Live tail", tailData{Events: evs, After: cursor})
}

// streamCursor matches a position in the fire or dead-letter streams: one
// stream entry ID per shard, joined by commas (queue.ReadFires). The queue
// checks it against the namespace's shard count; this keeps anything else
// from reaching it.
var streamCursor = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?(,[0-9]{1,20}(-[0-9]{1,20})?)*$`)

// validCursor reports whether c is a stream cursor of at most MaxShards
// positions.
func validCursor(c string) bool {
	return len(c) <= queue.MaxShards*42 && streamCursor.MatchString(c)
}

// streamID matches one stream entry ID.
var streamID = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?$`)

// tailPoll is how often a live tail reads the fire streams. The reads do
// not block: a blocking XREAD holds a pool connection for its whole wait,
// and 20 open tails held all of go-redis's default pool, so no page could
// get one. Polling costs a tail at most half a second of delay, and Redis
// one cheap read per tail per tailPoll, of at most Options.MaxTails tails.
const tailPoll = 500 * time.Millisecond

// tailKeepAlive is how long a tail with nothing to show waits before it
// writes a comment, so a gone browser (or a proxy's idle timeout) is
// noticed this soon.
const tailKeepAlive = 2 * time.Second

// tailEvents streams fire events as Server-Sent Events. The last event of
// each batch carries the cursor after it as its event ID, so a
// reconnecting browser resumes where it stopped (Last-Event-ID), at worst
// showing the rest of an interrupted batch again. Beyond the caps on open
// tails it answers 503 with Retry-After.
func (h *Handler) tailEvents(w http.ResponseWriter, r *http.Request) {
	after := cmp.Or(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after"), "0")
	if !validCursor(after) {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("after %q is not a fire stream cursor", after))
		return
	}
	release, err := h.tails.Acquire(r)
	if err != nil {
		h.tails.SetRetryAfter(w.Header())
		h.log.Warn("timerq ui: live tail refused", "client", httpstream.ClientOf(r), "err", err)
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	defer release()
	// A wrong cursor (say, for another shard count) fails now, as a 400,
	// rather than as a stream of problems.
	vctx, cancel := h.ctx(r)
	_, err = h.q.ReadFires(vctx, queue.ReadFiresOptions{Limit: 1, Cursor: after})
	cancel()
	if errors.Is(err, queue.ErrInvalidOptions) {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	st := httpstream.Start(w, h.opts.TailWriteTimeout)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if st.Send([]byte("retry: 2000\n\n")) != nil {
		return
	}
	st.Poll(r.Context(), httpstream.Poll{
		Every:     tailPoll,
		KeepAlive: tailKeepAlive,
		// Redis is failing: say so every keep-alive, not every poll.
		Backoff: tailKeepAlive,
		Next: func(ctx context.Context, buf *bytes.Buffer) (bool, error) {
			rctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
			defer cancel()
			page, err := h.q.ReadFires(rctx, queue.ReadFiresOptions{Limit: 100, Cursor: after})
			if err != nil {
				return false, err
			}
			for i, ev := range page.Events {
				if i == len(page.Events)-1 {
					fmt.Fprintf(buf, "id: %s\n", page.NextCursor)
					after = page.NextCursor
				}
				fmt.Fprintf(buf, "event: fire\ndata: %s\n\n", fireJSON(ev, h))
			}
			return len(page.Events) == 100, nil
		},
		Problem: func(buf *bytes.Buffer, err error) {
			h.log.Warn("timerq ui: reading the fire stream failed", "err", err)
			fmt.Fprintf(buf, "event: problem\ndata: %s\n\n", jsonString(err.Error()))
		},
	})
}
