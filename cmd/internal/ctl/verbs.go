package ctl

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// verb is one action of a command that takes it as its first argument
// (namespace, endpoints, flow, schedules, api-token): an argument rather
// than a subcommand, so that flags may follow the arguments, global ones
// too (`schedules get ID -o json`), as in every other command.
type verb struct {
	name string
	// arg names the verb's one argument ("endpoint name"); "" for none.
	arg string
	// optional makes arg optional (schedules import [FILE|-]).
	optional bool
	// fix says how to use the verb, for the error of a wrong argument count.
	fix string
	run func(c *cli.Context, args []string) error
}

// verbCommand returns cmd with an Action that dispatches on its first
// argument to verbs, checking each verb's argument count, and a completion
// that offers the verbs (urfave/cli's own offered only "help").
func verbCommand(cmd *cli.Command, verbs ...verb) *cli.Command {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.name
	}
	list := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(names) == 1 {
		list = names[0]
	}
	cmd.Action = func(c *cli.Context) error {
		name, args := c.Args().First(), c.Args().Tail()
		for _, v := range verbs {
			switch {
			case v.name != name:
				continue
			case v.arg == "" && len(args) > 0:
				return usageErr(fmt.Sprintf("%s %s takes no argument, not %q", cmd.Name, name, args), v.fix)
			case v.arg != "" && (len(args) > 1 || len(args) == 0 && !v.optional):
				return usageErr(fmt.Sprintf("%s %s takes one %s, not %d arguments", cmd.Name, name, v.arg, len(args)), v.fix)
			}
			return v.run(c, args)
		}
		return usageErr(fmt.Sprintf("%s takes %s, not %q", cmd.Name, list, name), fmt.Sprintf("run 'timerctl %s --help'", cmd.Name))
	}
	cmd.BashComplete = func(c *cli.Context) {
		if c.NArg() > 0 {
			return // a name or a file follows: the shell completes files
		}
		for _, n := range names {
			fmt.Fprintln(c.App.Writer, n)
		}
	}
	return cmd
}
