package cliconf_test

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/cmd/internal/cliconf"
)

// TestRepeatedFlag: a single-value flag given twice at one command level
// is a usage error naming it, whatever the spelling (alias, --f=v); a
// slice flag may repeat, an app flag and a command flag of one name are
// two flags, and values and arguments after "--" are not flags.
func TestRepeatedFlag(t *testing.T) {
	app := &cli.App{
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "namespace", Aliases: []string{"n"}},
			&cli.DurationFlag{Name: "timeout"},
			&cli.BoolFlag{Name: "dev"},
			&cli.StringSliceFlag{Name: "tag"},
			cliconf.MultiFlag("label", ""),
		},
		Commands: []*cli.Command{
			{Name: "wait", Flags: []cli.Flag{&cli.DurationFlag{Name: "timeout"}}},
			{Name: "schedules", Subcommands: []*cli.Command{{Name: "list", Flags: []cli.Flag{&cli.IntFlag{Name: "limit"}}}}},
		},
	}
	for _, tc := range []struct {
		args []string
		want string // "" for no error
	}{
		{[]string{"-n", "a", "--namespace", "b"}, "--namespace (or -n) is given more than once"},
		{[]string{"--namespace=a", "-n=b"}, "--namespace (or -n) is given more than once"},
		{[]string{"--dev", "--dev"}, "--dev is given more than once"},
		{[]string{"schedules", "list", "--limit", "1", "--limit", "2"}, "--limit is given more than once"},
		{[]string{"--tag", "a", "--tag", "b"}, ""},
		{[]string{"--label", "a=1", "--label=b=2"}, ""},
		{[]string{"--timeout", "1s", "wait", "x", "--timeout", "2s"}, ""},
		{[]string{"-n", "--namespace"}, ""}, // "--namespace" is the value of -n
		{[]string{"wait", "--", "--timeout", "--timeout"}, ""},
		{[]string{"--bogus", "--bogus"}, ""}, // the parser reports it
	} {
		err := cliconf.RepeatedFlag(app, append([]string{"prog"}, tc.args...))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v, want no error", tc.args, err)
		case tc.want != "":
			e, ok := err.(*cliconf.Error)
			if !ok || e.Code != cliconf.ExitUsage || !strings.Contains(err.Error(), tc.want) || e.Fix == "" {
				t.Errorf("%q: %v, want a usage error with %q", tc.args, err, tc.want)
			}
		}
	}
}

// TestMultiFlag: a MultiFlag keeps each value given, in order and whole:
// a comma is part of a value, as it is of a label's.
func TestMultiFlag(t *testing.T) {
	var got []string
	app := &cli.App{
		Commands: []*cli.Command{{Name: "list", Flags: []cli.Flag{cliconf.MultiFlag("label", "")},
			Action: func(c *cli.Context) error { got = cliconf.MultiValues(c, "label"); return nil }}},
	}
	if err := app.Run([]string{"prog", "list", "--label", "note=a,b", "--label=tenant=acme", "--label", " spaced "}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "note=a,b|tenant=acme| spaced " {
		t.Fatalf("values %q, want each whole, in order", got)
	}
	if err := app.Run([]string{"prog", "list"}); err != nil || got != nil {
		t.Fatalf("no --label: %q %v, want nil", got, err)
	}
}
