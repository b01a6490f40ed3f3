package ui_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// TestTimerPageShowsDebounceWindow: a debounce window's timer page names
// its key and deadline, not a schedule that does not exist.
func TestTimerPageShowsDebounceWindow(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		e := newEnv(t, b, ui.Options{})
		res, err := e.q.Debounce(context.Background(), "cart-7", queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := e.Get(t, "/timer?id="+url.QueryEscape(res.Timer.ID))
		if resp.StatusCode != 200 || !strings.Contains(body, `id="timer-debounce">window of key <code>cart-7</code>`) ||
			!strings.Contains(body, "deadline "+res.Deadline.UTC().Format("2006-01-02T15:04:05.000Z")) {
			t.Fatalf("the window's timer page: %d\n%s", resp.StatusCode, body)
		}
		if strings.Contains(body, `id="timer-schedule"`) {
			t.Errorf("the window's timer page links a schedule:\n%s", body)
		}
	})
}
