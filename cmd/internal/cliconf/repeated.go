package cliconf

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// RepeatedFlag returns a usage error when args (args[0] is the program
// name) give a single-value flag twice at one command level, as in
// `--namespace a ... --namespace b`: urfave/cli keeps the last one
// silently. An alias counts as its flag (-n and --namespace); slice flags
// may repeat. A flag of the app and one of a command that share a name are
// two flags. Arguments after "--" are not flags. It leaves unknown flags
// to the parser, which reports them.
func RepeatedFlag(app *cli.App, args []string) error {
	// command finds a command of the level: the app's, then a command's.
	flags, command := app.Flags, app.Command
	seen := map[cli.Flag]bool{}
	positional := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return nil
		}
		if len(a) < 2 || a[0] != '-' {
			if !positional {
				if cmd := command(a); cmd != nil {
					if cmd.SkipFlagParsing {
						return nil
					}
					flags, command, seen = cmd.Flags, cmd.Command, map[cli.Flag]bool{}
					continue
				}
			}
			positional = true
			continue
		}
		name, _, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := FindFlag(flags, name)
		if f == nil {
			continue
		}
		if seen[f] && !isSliceFlag(f) {
			long := f.Names()[0]
			also := ""
			if len(f.Names()) > 1 {
				alias := f.Names()[1]
				also = fmt.Sprintf(" (or %s%s)", strings.Repeat("-", min(len(alias), 2)), alias)
			}
			return Usage(fmt.Sprintf("--%s%s is given more than once", long, also),
				"give it once: only one value can count, and silently keeping the last would hide a mistake")
		}
		seen[f] = true
		if d, ok := f.(cli.DocGenerationFlag); ok && d.TakesValue() && !inline {
			i++ // its value, which may look like anything
		}
	}
	return nil
}

// FindFlag returns the flag of flags that has name among its names, or nil.
func FindFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func isSliceFlag(f cli.Flag) bool {
	switch f := f.(type) {
	case *cli.StringSliceFlag, *cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.Float64SliceFlag, *cli.UintSliceFlag, *cli.Uint64SliceFlag:
		return true
	case *cli.GenericFlag:
		_, ok := f.Value.(*Multi)
		return ok
	}
	return false
}

// Multi is the value of a flag that may be given any number of times,
// each value taken whole: cli.StringSliceFlag also splits a value at its
// commas, which a label's value (--label note=a,b) or a header's may hold.
type Multi []string

// Set adds one value.
func (m *Multi) Set(v string) error {
	*m = append(*m, v)
	return nil
}

// String is the values given, for help.
func (m *Multi) String() string { return strings.Join(*m, " ") }

// MultiFlag is a flag name that may be repeated, each value taken whole
// (Multi); MultiValues reads what it was given.
func MultiFlag(name, usage string) *cli.GenericFlag {
	return &cli.GenericFlag{Name: name, Usage: usage, Value: &Multi{}}
}

// MultiValues returns the values given to c's MultiFlag name, in order;
// nil when it was not given (or is no MultiFlag). Like every flag, a
// MultiFlag keeps what it parsed: make a fresh one for each run.
func MultiValues(c *cli.Context, name string) []string {
	if m, ok := c.Generic(name).(*Multi); ok && m != nil && c.IsSet(name) {
		return *m
	}
	return nil
}
