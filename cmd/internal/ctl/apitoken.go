package ctl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api/apitoken"
)

type apiTokenJSON struct {
	Name  string `json:"name"`
	Token string `json:"token"`
	// Line is the token's line for timerworker's --api-tokens-file: its
	// hash, never the token.
	Line string `json:"line"`
}

// apiTokenCommand is `timerctl api-token create NAME --namespace P
// --rights R [--rps N]`: it mints a token for timerworker's HTTP API and
// prints it once, with the line for the tokens file. Like `namespace`, the
// verb is the first argument, so that flags may follow the arguments. It
// touches no Redis: the tokens file is the worker's.
func (r *runner) apiTokenCommand() *cli.Command {
	return verbCommand(&cli.Command{
		Name:      "api-token",
		Usage:     "mint a bearer token for timerworker's HTTP API (create NAME --namespace PATTERN --rights RIGHTS)",
		ArgsUsage: "create NAME --namespace PATTERN[,PATTERN] --rights read[,write][,admin] [--rps N]",
		Description: `Prints a new token once, and the line to add to timerworker's
--api-tokens-file, which holds only the token's SHA-256 hash. Add the line to
the file of every worker, then send them SIGHUP. The token cannot be shown
again: if it is lost, mint another and remove the old line. See
docs/security.md.`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "namespace", Aliases: []string{"n"},
				Usage: "namespaces the token may touch: a name or a glob (`PATTERN`: orders, billing-*, * for all); several: a,b or repeat the flag"},
			&cli.StringFlag{Name: "rights", Usage: "what it may do there: `RIGHTS` among read (GET), write (other methods), admin (create and delete namespaces), e.g. read,write"},
			&cli.Float64Flag{Name: "rps", Usage: "limit it to `N` requests per second (0: unlimited; unset: timerworker's --api-rate-limit)"},
		},
	}, verb{name: "create", arg: "token name", run: r.apiTokenCreate,
		fix: "run 'timerctl api-token create NAME --namespace PATTERN --rights read,write', naming the token after its user"})
}

func (r *runner) apiTokenCreate(c *cli.Context, args []string) error {
	g, err := r.globals()
	if err != nil {
		return err
	}
	var namespaces []string
	for _, v := range c.StringSlice("namespace") {
		namespaces = append(namespaces, strings.Split(v, ",")...)
	}
	if len(namespaces) == 0 {
		return usageErr("api-token create needs --namespace", "give the namespaces the token may touch, e.g. --namespace orders or --namespace 'billing-*' (--namespace '*' for all)")
	}
	if c.String("rights") == "" {
		return usageErr("api-token create needs --rights", "give read, write or admin, separated by commas, e.g. --rights read,write")
	}
	var rights []apitoken.Right
	for _, s := range strings.Split(c.String("rights"), ",") {
		rights = append(rights, apitoken.Right(strings.TrimSpace(s)))
	}
	token, t, err := apitoken.Mint(args[0], namespaces, rights)
	var e *apitoken.Error
	if errors.As(err, &e) {
		return usageErr(e.Problem, e.Fix)
	} else if err != nil {
		return err
	}
	if c.IsSet("rps") {
		t.RPS, t.HasRPS = c.Float64("rps"), true
		if t.RPS < 0 {
			return usageErr(fmt.Sprintf("--rps %v is negative", t.RPS), "give requests per second, or 0 for unlimited")
		}
	}
	return r.emitf(g, apiTokenJSON{Name: t.Name, Token: token, Line: t.Line()}, "Token (shown only now; the tokens file keeps only its hash):\n  %s\n"+
		"Line for timerworker's --api-tokens-file (add it, then send the workers SIGHUP):\n  %s\n", token, t.Line())
}
