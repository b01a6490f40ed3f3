package ctl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/queue"
)

// TestClassifyGivesTimerctlHints: package queue's hints name Go calls
// (Recurring().List, Endpoints().Put …); where timerctl prints one of its
// sentinels, the fix is timerctl's own command instead, with the exit code
// the sentinel carries.
func TestClassifyGivesTimerctlHints(t *testing.T) {
	goHint := func(sentinel error, hint string) error {
		return fmt.Errorf("%w: \"x\" in namespace \"ns\"; %s", sentinel, hint)
	}
	for _, c := range []struct {
		err  error
		code int
		want string
	}{
		{goHint(queue.ErrRecurringNotFound, "check the ID, or list the schedules with Recurring().List"), ExitNotFound, "'timerctl schedules list'"},
		{goHint(queue.ErrEndpointNotFound, "create it first (Endpoints().Put)"), ExitNotFound, "'timerctl endpoints list'"},
		{goHint(queue.ErrTimerURLsOff, "allow them (Deliveries().SetPolicy)"), ExitFailure, "'timerctl delivery-policy --allow-timer-urls=true'"},
		{fmt.Errorf("%w: in use (%w); copy the timers (List, then Restore)", queue.ErrShardMismatch, queue.ErrNamespaceInUse), ExitConflict, "'timerctl export | timerctl -n NEW import'"},
	} {
		ex := classify(c.err, cliconf.Target{Namespace: "ns"})
		if ex.ExitCode() != c.code || !strings.Contains(ex.Fix, c.want) || strings.Contains(ex.Error(), "()") || !errors.Is(ex, c.err) {
			t.Errorf("classify(%v) = exit %d, %q; want exit %d and a fix with %s, and no Go call", c.err, ex.ExitCode(), ex.Error(), c.code, c.want)
		}
	}
}
