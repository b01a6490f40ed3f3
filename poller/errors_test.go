package poller_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// The poller's errors carry one prefix, "timerq: poller: ", not the
// stutter "poller: timerq: invalid options: …".
func TestErrorsCarryOnePrefix(t *testing.T) {
	_, rdb := redistest.Mini(t)
	q := newQueue(t, rdb, "v")
	_, bad := poller.New(q, poller.Options{BatchSize: -1})
	_, nilQueue := poller.New(nil, poller.Options{})
	for _, c := range []struct {
		err  error
		want error
		text string
	}{
		{bad, queue.ErrInvalidOptions, "timerq: poller: invalid options: BatchSize -1 is outside 1..1000; use 0 for the default 256"},
		{nilQueue, queue.ErrInvalidOptions, "timerq: poller: invalid options: the queue is nil; pass one from queue.New"},
		{poller.ErrRunning, poller.ErrRunning, "timerq: poller: already running; use one Poller per concurrent Run"},
	} {
		if !errors.Is(c.err, c.want) || c.err.Error() != c.text {
			t.Errorf("got %v\nwant %s (wrapping %v)", c.err, c.text, c.want)
		}
		if strings.Count(c.err.Error(), "timerq: ") != 1 {
			t.Errorf("%q carries the prefix more than once", c.err)
		}
	}
}
