// Package errtext builds timerq's error messages, so that every package
// prints one prefix: "timerq: ", once, however deeply errors are wrapped.
package errtext

import (
	"fmt"
	"strings"
)

// Prefix starts the text of every error timerq's packages return.
const Prefix = "timerq: "

// Errorf is fmt.Errorf for errors that add context to a cause: it puts
// Prefix in front of the message and takes it off the text of each error
// among args, so the message carries Prefix once. %w keeps the causes for
// errors.Is and errors.As.
//
//	Errorf("get %q: %w", id, err) // timerq: get "x": Redis refused …
func Errorf(format string, args ...any) error {
	args = append([]any(nil), args...)
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = unprefixed{err}
		}
	}
	return fmt.Errorf(Prefix+format, args...)
}

// unprefixed is an error whose text loses a leading Prefix; it unwraps to
// the error itself.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), Prefix) }
func (u unprefixed) Unwrap() error { return u.err }
