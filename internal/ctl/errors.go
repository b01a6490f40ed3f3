package ctl

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/timerq/timerq/queue"
)

// Exit codes of timerctl, as documented in `timerctl --help` and
// docs/timerctl.md.
const (
	ExitOK       = 0 // success
	ExitFailure  = 1 // operational failure: Redis unreachable, authentication, I/O
	ExitUsage    = 2 // usage error; also import with rejected lines
	ExitNotFound = 3 // no such timer
	ExitConflict = 4 // the timer's state forbids the operation
	ExitTimeout  = 5 // wait timed out
)

// Error is a failure with its exit code, printed as
// "timerctl: <Problem>: <Fix>".
type Error struct {
	Code    int
	Problem string // what went wrong
	Fix     string // what to do
	Err     error  // the cause, if any
}

// Error returns "<Problem>: <Fix>".
func (e *Error) Error() string {
	if e.Fix == "" {
		return e.Problem
	}
	return e.Problem + ": " + e.Fix
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func usageErr(problem, fix string) *Error {
	return &Error{Code: ExitUsage, Problem: problem, Fix: fix}
}

// errWaitTimeout is the cause of the context wait gives up with, telling
// the wait timeout (exit 5) from the Redis timeout (exit 1).
var errWaitTimeout = errors.New("wait timed out")

// errRejected marks an import that skipped lines; they were reported one by
// one, so Run prints nothing more.
var errRejected = &Error{Code: ExitUsage}

func isQueueSentinel(err error) bool {
	for _, s := range []error{queue.ErrNotFound, queue.ErrAlreadyFired, queue.ErrCancelled,
		queue.ErrInvalidID, queue.ErrInvalidNamespace, queue.ErrInvalidDue, queue.ErrPayloadTooLarge,
		queue.ErrInvalidOptions, queue.ErrWrongType, queue.ErrShardMismatch, queue.ErrSlotMigrating} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// classify maps any error a command returns to its exit code and message.
func classify(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	msg := strings.TrimPrefix(err.Error(), "timerq: ")
	// queue's messages end in "; <what to do>" when they know it: use
	// theirs, in timerctl's "<problem>: <fix>" form.
	own := func(code int, fix string) *Error {
		if i := strings.LastIndex(msg, "; "); i >= 0 {
			return &Error{Code: code, Problem: msg[:i], Fix: msg[i+2:], Err: err}
		}
		return &Error{Code: code, Problem: msg, Fix: fix, Err: err}
	}
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return own(ExitNotFound, "check the ID and --namespace; 'timerctl list' shows the timers")
	case errors.Is(err, queue.ErrAlreadyFired), errors.Is(err, queue.ErrCancelled):
		return own(ExitConflict, "'timerctl get ID' shows its state; schedule a new timer with another ID")
	case errors.Is(err, queue.ErrInvalidID):
		return own(ExitUsage, "pass a valid timer ID")
	case errors.Is(err, queue.ErrInvalidNamespace):
		return own(ExitUsage, "fix --namespace (TIMERQ_NAMESPACE)")
	case errors.Is(err, queue.ErrInvalidDue), errors.Is(err, queue.ErrInvalidOptions):
		return own(ExitUsage, "see 'timerctl --help'")
	case errors.Is(err, queue.ErrPayloadTooLarge):
		return own(ExitUsage, "shrink the payload")
	case errors.Is(err, queue.ErrSlotMigrating):
		return own(ExitFailure, "run the command again once the slot has moved")
	case errors.Is(err, queue.ErrShardMismatch):
		return own(ExitConflict, "'timerctl namespace show' prints the namespace's shard count")
	case errors.Is(err, queue.ErrWrongType):
		return own(ExitFailure, "use another --namespace")
	case errors.Is(err, context.Canceled):
		return &Error{Code: ExitFailure, Problem: "interrupted", Fix: "run the command again to finish it", Err: err}
	}
	// Errors urfave/cli returns itself (a missing Required flag, say).
	return &Error{Code: ExitFailure, Problem: msg, Fix: "run 'timerctl --help' for the usage", Err: err}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
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
