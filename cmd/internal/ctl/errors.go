package ctl

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/schedule"
)

// Exit codes of timerctl, as documented in `timerctl --help` and
// docs/timerctl.md; the same as timerworker's (package cliconf).
const (
	ExitOK       = cliconf.ExitOK       // success
	ExitFailure  = cliconf.ExitFailure  // operational failure: Redis unreachable or refusing, I/O
	ExitUsage    = cliconf.ExitUsage    // usage error; also import with rejected lines
	ExitNotFound = cliconf.ExitNotFound // no such timer
	ExitConflict = cliconf.ExitConflict // the timer's state forbids the operation
	ExitTimeout  = cliconf.ExitTimeout  // wait timed out
)

// Error is a failure with its exit code, printed as
// "timerctl: <Problem>: <Fix>"; timerworker prints the same type.
type Error = cliconf.Error

func usageErr(problem, fix string) *Error { return cliconf.Usage(problem, fix) }

// errWaitTimeout is the cause of the context wait gives up with, telling
// the wait timeout (exit 5) from the Redis timeout (exit 1).
var errWaitTimeout = errors.New("wait timed out")

// errRejected marks an import that skipped lines; they were reported one by
// one, so Run prints nothing more.
var errRejected = &Error{Code: ExitUsage}

// classify maps any error a command returns to its exit code and message:
// the queue's sentinels get timerctl's own fixes, and everything else the
// mapping both binaries share (cliconf.Explain). Package queue's hints
// name Go calls (Recurring().List); a sentinel whose hint a timerctl user
// needs in timerctl's words gets it here, replacing queue's.
func classify(err error, t cliconf.Target) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, schedule.ErrInvalidSchedule) {
		// A bad spec keeps queue's own "; <what to do>" as the fix.
		msg := strings.TrimPrefix(err.Error(), "timerq: ")
		if i := strings.LastIndex(msg, "; "); i >= 0 {
			return &Error{Code: ExitUsage, Problem: msg[:i], Fix: msg[i+2:], Err: err}
		}
		return &Error{Code: ExitUsage, Problem: msg, Fix: "see 'timerctl schedule --help'", Err: err}
	}
	ex := cliconf.Explain(err, t)
	var few *queue.TooFewReplicasError
	switch {
	case errors.As(err, &few):
		ex.Code = ExitConflict
		ex.Problem = strings.TrimPrefix(few.Problem(), "timerq: ")
		ex.Fix = few.Fix("--force")
	case errors.Is(err, queue.ErrReplicasUnread):
		ex.Fix = "grant the Redis user +info, or skip the check with --force if every master has its replicas"
	case errors.Is(err, queue.ErrNotFound):
		ex.Fix = "check the ID and --namespace; 'timerctl list' shows the timers"
	case errors.Is(err, queue.ErrAlreadyFired), errors.Is(err, queue.ErrCancelled):
		ex.Fix = cmp.Or(ex.Fix, "'timerctl get ID' shows its state; schedule a new timer with another ID")
	case errors.Is(err, queue.ErrInvalidID):
		ex.Fix = cmp.Or(ex.Fix, "pass a valid timer ID")
	case errors.Is(err, queue.ErrInvalidDue), errors.Is(err, queue.ErrInvalidOptions):
		ex.Fix = cmp.Or(ex.Fix, "see 'timerctl --help'")
	case errors.Is(err, queue.ErrEndpointNotFound):
		ex.Fix = "check the name and --namespace; 'timerctl endpoints list' shows the endpoints, 'timerctl endpoints create NAME --url URL --secret-file PATH' makes one"
	case errors.Is(err, queue.ErrRecurringNotFound):
		ex.Fix = "check the ID and --namespace; 'timerctl schedules list' shows the schedules"
	case errors.Is(err, queue.ErrCancelJobNotFound):
		ex.Fix = "check the job ID and --namespace; 'timerctl cancel-jobs list' shows the jobs kept"
	case errors.Is(err, queue.ErrTimerURLsOff):
		ex.Fix = "drop --deliver-url to deliver to the endpoint's URL, or let timers give URLs: 'timerctl delivery-policy --allow-timer-urls=true' (an admin's decision: a timer URL chooses where its payload goes)"
	case errors.Is(err, queue.ErrPrivateAddress):
		ex.Fix = "if the endpoint is meant to be internal, admit its range with --allow CIDR (the dispatcher needs its own allow rule too)"
	case errors.Is(err, queue.ErrNamespaceInUse):
		ex.Code = ExitConflict
		ex.Fix = "create the shards in a new namespace ('timerctl namespace create NEW --shards N') and copy the timers and schedules into it: 'timerctl export | timerctl -n NEW import'"
	case errors.Is(err, queue.ErrStaleEpoch):
		// Nothing was written, and the same epoch is refused again: a
		// conflict with the executor that bumped the epoch since.
		ex.Code = ExitConflict
		ex.Fix = "another executor bumped the owner's epoch: stop, or take the owner over with 'timerctl owner bump OWNER' and schedule under the epoch it prints ('timerctl owner get OWNER' shows the current one)"
	case errors.Is(err, queue.ErrShardMismatch):
		// The namespace exists with another shard count: a conflict.
		ex.Code = ExitConflict
		ex.Fix = cmp.Or(ex.Fix, "'timerctl namespace show' prints the namespace's shard count")
	case errors.Is(err, queue.ErrQuotaExceeded):
		// Nothing was written, and trying again changes nothing until the
		// namespace holds less or its quota is raised: a conflict.
		ex.Code = ExitConflict
		quota := "QUOTA"
		var qe *queue.QuotaError
		if errors.As(err, &qe) {
			quota = qe.Quota
		}
		ex.Fix = fmt.Sprintf("'timerctl stats' shows the usage against each quota; remove some first, or have an admin raise it: 'timerctl namespace quotas --%s N'", quota)
	case errors.Is(err, queue.ErrSlotMigrating):
		ex.Fix = cmp.Or(ex.Fix, "run the command again once the slot has moved")
	case errors.Is(err, queue.ErrClusterDown):
		ex.Fix = cmp.Or(ex.Fix, "run the command again once Redis Cluster has promoted a replica (CLUSTER INFO shows cluster_state:ok), usually within seconds")
	}
	return ex
}

// redactText removes from s every password found in a URL among args: a
// last line of defence for error texts that quote a URL we did not build.
func redactText(s string, args []string) string {
	for _, a := range args {
		u, err := url.Parse(strings.TrimPrefix(strings.TrimPrefix(a, "--redis="), "-redis="))
		if err != nil || u.User == nil {
			continue
		}
		if pw, ok := u.User.Password(); ok && len(pw) > 0 {
			s = strings.ReplaceAll(s, pw, "xxxxx")
			if esc := url.QueryEscape(pw); esc != pw {
				s = strings.ReplaceAll(s, esc, "xxxxx")
			}
		}
	}
	return s
}
