package cliconf

import (
	"fmt"
	"regexp"

	"github.com/urfave/cli/v2"
)

var (
	// Go's flag package, which urfave/cli v2 parses with.
	flagValueRe = regexp.MustCompile(`^invalid value "(.*)" for flag -+([A-Za-z0-9-]+): `)
	// urfave/cli's own message for a bad TIMERQ_* value.
	envValueRe = regexp.MustCompile(`^could not parse "(.*)" as \w+ value from (?:env var|environment variable) "([A-Z0-9_]+)" for flag ([A-Za-z0-9-]+): `)
)

// FlagValueError rewrites urfave/cli's message for an unparsable flag or
// environment value ("invalid value "5" for flag -max-poll-interval: parse
// error") into a usage error that names the flag and shows a value that
// works. flags are where the flag is looked up (the app's and the
// command's). Other errors come back as usage errors with fix.
func FlagValueError(err error, flags []cli.Flag, fix string) *Error {
	msg := err.Error()
	var val, name, source string
	if m := flagValueRe.FindStringSubmatch(msg); m != nil {
		val, name, source = m[1], m[2], "--"+m[2]
	} else if m := envValueRe.FindStringSubmatch(msg); m != nil {
		val, name = m[1], m[3]
		source = m[2] + " (--" + name + ")"
	} else {
		return &Error{Code: ExitUsage, Problem: msg, Fix: fix, Err: err}
	}
	f := FindFlag(flags, name)
	if f != nil {
		name = f.Names()[0]
	}
	switch f.(type) {
	case *cli.DurationFlag:
		return &Error{Code: ExitUsage, Problem: fmt.Sprintf("%s %q is not a duration", source, val),
			Fix: fmt.Sprintf("give it a unit, e.g. --%s 5s (or 500ms, 1m, 1h30m)", name), Err: err}
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return &Error{Code: ExitUsage, Problem: fmt.Sprintf("%s %q is not a whole number", source, val),
			Fix: fmt.Sprintf("e.g. --%s 100; %s", name, fix), Err: err}
	case *cli.Float64Flag:
		return &Error{Code: ExitUsage, Problem: fmt.Sprintf("%s %q is not a number", source, val),
			Fix: fmt.Sprintf("e.g. --%s 100 or 0.5", name), Err: err}
	case *cli.BoolFlag:
		return &Error{Code: ExitUsage, Problem: fmt.Sprintf("%s %q is not true or false", source, val),
			Fix: fmt.Sprintf("use --%s alone for true, or --%s=false", name, name), Err: err}
	}
	return &Error{Code: ExitUsage, Problem: fmt.Sprintf("%s %q is not valid", source, val), Fix: fix, Err: err}
}
