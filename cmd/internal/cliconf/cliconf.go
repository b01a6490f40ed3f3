// Package cliconf is what timerworker and timerctl share, so that the two
// binaries cannot drift apart: the connection flags and their TIMERQ_*
// environment variables (--redis and the --tls-* flags), the URL → client
// wiring (TLS included), the exit codes, the shape of an error
// ("<problem>: <fix>") and the mapping from any error to an exit code and a
// hint that fits its cause.
package cliconf

import "strings"

// Exit codes of both binaries, documented in their --help and in
// docs/timerctl.md and docs/worker.md.
const (
	ExitOK       = 0 // success
	ExitFailure  = 1 // runtime failure: Redis unreachable or refusing, I/O
	ExitUsage    = 2 // usage error: a bad flag, value or argument
	ExitNotFound = 3 // no such timer (timerctl)
	ExitConflict = 4 // the timer's state forbids the operation (timerctl)
	ExitTimeout  = 5 // wait timed out (timerctl)
)

// Error is a failure an operator can act on, printed by both binaries as
// one line "<binary>: <Problem>: <Fix>", and ending the process with Code.
type Error struct {
	// Code is the exit code; 0 means ExitFailure, so that a Problem/Fix
	// literal without a code is a runtime failure.
	Code    int
	Problem string // what went wrong
	Fix     string // what to do
	Err     error  // the cause, if any, for errors.Is
}

// Error returns "<Problem>: <Fix>", or Problem alone without a Fix.
func (e *Error) Error() string {
	if e.Fix == "" {
		return e.Problem
	}
	return e.Problem + ": " + e.Fix
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ExitCode returns Code, or ExitFailure when Code is 0.
func (e *Error) ExitCode() int {
	if e.Code == 0 {
		return ExitFailure
	}
	return e.Code
}

// Usage returns a usage error (exit code 2).
func Usage(problem, fix string) *Error {
	return &Error{Code: ExitUsage, Problem: problem, Fix: fix}
}

// OneLine puts a message on one line, its runs of white space (newlines
// too) folded into single spaces.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
