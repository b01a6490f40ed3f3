package httpstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/httpstream"
)

// TestPollSendsBatchesProblemsAndKeepAlives: a full batch is followed by
// another read at once (a tick of an hour never comes), a failed read by
// its problem event and then Backoff, and a read that finds nothing sends
// a keep-alive comment once KeepAlive has passed; the loop ends with its
// context.
func TestPollSendsBatchesProblemsAndKeepAlives(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := &notifyWriter{httptest.NewRecorder(), func(p string) {
		if p == ": keep-alive\n\n" {
			cancel()
		}
	}}
	calls := 0
	httpstream.Start(w, time.Second).Poll(ctx, httpstream.Poll{
		Every: time.Hour, KeepAlive: 0, Backoff: time.Millisecond,
		Next: func(_ context.Context, buf *bytes.Buffer) (bool, error) {
			switch calls++; calls {
			case 1:
				buf.WriteString("event: a\n\n")
				return true, nil
			case 2:
				return false, errors.New("redis down")
			}
			return false, nil
		},
		Problem: func(buf *bytes.Buffer, err error) { fmt.Fprintf(buf, "event: problem\ndata: %s\n\n", err) },
	})
	if calls != 3 {
		t.Fatalf("Next ran %d times, want 3 (a full batch is read again at once, a failure after Backoff)", calls)
	}
	want := "event: a\n\nevent: problem\ndata: redis down\n\n: keep-alive\n\n"
	if got := w.Body.String(); got != want {
		t.Fatalf("sent %q, want %q", got, want)
	}
}

// notifyWriter records a response and tells after of each write.
type notifyWriter struct {
	*httptest.ResponseRecorder
	after func(p string)
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseRecorder.Write(p)
	w.after(string(p))
	return n, err
}

// TestPollKeepsQuietUntilKeepAlive: reads that find nothing send nothing
// while KeepAlive has not passed.
func TestPollKeepsQuietUntilKeepAlive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := httptest.NewRecorder()
	calls := 0
	httpstream.Start(rec, time.Second).Poll(ctx, httpstream.Poll{
		Every: time.Millisecond, KeepAlive: time.Hour, Backoff: time.Millisecond,
		Next: func(context.Context, *bytes.Buffer) (bool, error) {
			if calls++; calls == 3 {
				cancel()
			}
			return false, nil
		},
		Problem: func(*bytes.Buffer, error) { t.Error("Problem called without an error") },
	})
	if rec.Body.Len() != 0 {
		t.Fatalf("sent %q before KeepAlive passed", rec.Body.String())
	}
}

// failingWriter is a client that stopped reading.
type failingWriter struct{ httptest.ResponseRecorder }

func (*failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestPollStopsWhenSendFails: a client that is gone ends the loop at its
// first failed write, not at the request's end.
func TestPollStopsWhenSendFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := 0
	var w http.ResponseWriter = &failingWriter{*httptest.NewRecorder()}
	httpstream.Start(w, time.Second).Poll(ctx, httpstream.Poll{
		Every: time.Millisecond, KeepAlive: time.Hour, Backoff: time.Millisecond,
		Next: func(_ context.Context, buf *bytes.Buffer) (bool, error) {
			calls++
			buf.WriteString("event: a\n\n")
			return false, nil
		},
		Problem: func(*bytes.Buffer, error) {},
	})
	if calls != 1 || ctx.Err() != nil {
		t.Fatalf("Next ran %d times (context error %v): the loop went on after a failed Send", calls, ctx.Err())
	}
}
