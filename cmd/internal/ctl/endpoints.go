package ctl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// endpointsCommand is `timerctl endpoints create|get|list|delete|enable|
// disable`.
func (r *runner) endpointsCommand() *cli.Command {
	return verbCommand(&cli.Command{
		Name:      "endpoints",
		Usage:     "manage the HTTP endpoints fires are delivered to (create NAME --url URL --secret-file PATH | get NAME | list | delete NAME | enable NAME | disable NAME)",
		ArgsUsage: "create NAME --url URL --secret-file PATH [flags] | get NAME | list | delete NAME | enable NAME | disable NAME",
		Description: `create makes or replaces the endpoint NAME of --namespace. Its signing secrets are read
from --secret-file, one per line ("whsec_" and the base64 of 24-64 random bytes, e.g.
echo whsec_$(head -c 32 /dev/urandom | base64)), never from the command line; give two
during a rotation. Secrets and header values are never printed whole: a
header value shows as a fingerprint, "…(" and 8 hex digits of its SHA-256.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Usage: "create: the endpoint's `URL`, http:// or https://"},
			&cli.StringFlag{Name: "secret-file", Usage: "create: read the signing secrets from `PATH`, one per line"},
			&cli.StringSliceFlag{Name: "header", Usage: "create: an extra request header `NAME: VALUE` (repeat for more)"},
			&cli.DurationFlag{Name: "request-timeout", Usage: "create: bound of one attempt, `D` (0: the default, 30s)"},
			&cli.IntFlag{Name: "max-attempts", Usage: "create: attempts before dead-lettering (0: the default, 10)"},
			&cli.DurationFlag{Name: "max-age", Usage: "create: retry a fire at most `D` after its due time (0: the default, 24h)"},
			&cli.DurationFlag{Name: "backoff-base", Usage: "create: first backoff `D` (0: the default, 1s)"},
			&cli.DurationFlag{Name: "backoff-cap", Usage: "create: longest backoff `D` (0: the default, 10m)"},
			&cli.BoolFlag{Name: "retry-client-errors", Usage: "create: retry 4xx answers (but 408, 410, 429) instead of dead-lettering them"},
			&cli.IntFlag{Name: "max-in-flight", Usage: "create: attempts under way at once per dispatcher (0: the default, 16)"},
			&cli.BoolFlag{Name: "disabled", Usage: "create: store the endpoint disabled"},
			&cli.StringSliceFlag{Name: "allow", Usage: "create: admit a URL whose host is an address in `CIDR` though private or loopback (repeat for more)"},
		},
	},
		verb{name: "create", arg: "endpoint name", fix: "run 'timerctl endpoints create NAME --url URL --secret-file PATH'", run: r.endpointCreate},
		verb{name: "get", arg: "endpoint name", fix: "run 'timerctl endpoints get NAME'", run: r.endpointByName},
		verb{name: "list", fix: "run 'timerctl endpoints list'", run: r.endpointList},
		verb{name: "delete", arg: "endpoint name", fix: "run 'timerctl endpoints delete NAME'", run: r.endpointByName}, verb{name: "enable", arg: "endpoint name", fix: "run 'timerctl endpoints enable NAME'", run: r.endpointByName}, verb{name: "disable", arg: "endpoint name", fix: "run 'timerctl endpoints disable NAME'", run: r.endpointByName})
}

func (r *runner) endpointCreate(c *cli.Context, args []string) error {
	e := queue.Endpoint{Name: args[0], URL: c.String("url"), Timeout: c.Duration("request-timeout"),
		Retry: queue.RetryPolicy{MaxAttempts: c.Int("max-attempts"), MaxAge: c.Duration("max-age"),
			Base: c.Duration("backoff-base"), Cap: c.Duration("backoff-cap"), RetryClientErrors: c.Bool("retry-client-errors")},
		MaxInFlight: c.Int("max-in-flight"), Disabled: c.Bool("disabled")}
	if e.URL == "" {
		return usageErr("endpoints create needs --url", "give the endpoint's http:// or https:// URL")
	}
	for _, h := range c.StringSlice("header") {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			return usageErr(fmt.Sprintf("--header %q is not NAME: VALUE", h), "write it as --header 'Authorization: Bearer ...'")
		}
		if e.Headers == nil {
			e.Headers = map[string]string{}
		}
		e.Headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	path := c.String("secret-file")
	if path == "" {
		return usageErr("endpoints create needs --secret-file", "put one secret per line in a file (echo whsec_$(head -c 32 /dev/urandom | base64) > secret) and pass --secret-file")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return usageErr(fmt.Sprintf("--secret-file: %v", err), "give a readable file holding one secret per line")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if s := strings.TrimSpace(line); s != "" {
			e.Secrets = append(e.Secrets, queue.Secret(s))
		}
	}
	var opts queue.PutEndpointOptions
	for _, a := range c.StringSlice("allow") {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			if addr, aerr := netip.ParseAddr(a); aerr == nil {
				p = netip.PrefixFrom(addr, addr.BitLen())
			} else {
				return usageErr(fmt.Sprintf("--allow %q is not a CIDR", a), "give a range such as 10.0.0.0/8 or an address such as 127.0.0.1")
			}
		}
		opts.Allow = append(opts.Allow, p)
	}
	// Refused before connecting: a usage error costs no round trip.
	if err := queue.ValidateEndpoint(e, &opts); err != nil {
		return err
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		created, err := s.q.Endpoints().Put(ctx, e, &opts)
		if err != nil {
			return err
		}
		stored, err := s.q.Endpoints().Get(ctx, e.Name)
		return r.endpointOut(s, stored, &created, map[bool]string{true: "created", false: "replaced"}[created], err)
	})
}

// endpointByName runs get, delete, enable or disable.
func (r *runner) endpointByName(c *cli.Context, args []string) error {
	verb, name := c.Args().First(), args[0]
	if err := queue.ValidateEndpointName(name); err != nil {
		return err
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		switch verb {
		case "get":
			e, err := s.q.Endpoints().Get(ctx, name)
			return r.endpointOut(s, e, nil, "", err)
		case "delete":
			if err := s.q.Endpoints().Delete(ctx, name); err != nil {
				return err
			}
			return r.emitf(s.g, map[string]any{"name": name, "deleted": true}, "deleted endpoint %s\n", name)
		}
		e, err := s.q.Endpoints().SetEnabled(ctx, name, verb == "enable")
		return r.endpointOut(s, e, nil, verb+"d", err)
	})
}

// endpointOut prints e, unless err, with created in JSON and note beside
// its name in the table.
func (r *runner) endpointOut(s *session, e queue.Endpoint, created *bool, note string, err error) error {
	if err != nil {
		return err
	}
	j := api.ToEndpointJSON(e)
	j.Created = created
	return r.emit(s.g, j, func(w io.Writer) error { return writeEndpoint(w, e, note) })
}

func (r *runner) endpointList(c *cli.Context, _ []string) error {
	return show(r, c, func(ctx context.Context, s *session) ([]queue.Endpoint, error) { return s.q.Endpoints().List(ctx) },
		func(s *session, list []queue.Endpoint) error {
			return r.emit(s.g, map[string]any{"endpoints": mapList(list, api.ToEndpointJSON)}, func(w io.Writer) error {
				return writeRows(w, "no endpoints in namespace "+s.q.Namespace(), "NAME\tSTATE\tURL\tSECRETS", list, func(e queue.Endpoint) string {
					j := api.ToEndpointJSON(e)
					return fmt.Sprintf("%s\t%s\t%s\t%s", e.Name, enabledText(j.Enabled), e.URL, strings.Join(j.Secrets, " "))
				})
			})
		})
}

func enabledText(on bool) string {
	if on {
		return "enabled"
	}
	return "disabled"
}

// writeEndpoint prints one endpoint as label: value lines.
func writeEndpoint(w io.Writer, e queue.Endpoint, note string) error {
	j := api.ToEndpointJSON(e)
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	name := e.Name
	if note != "" {
		name += " (" + note + ")"
	}
	row("name", name)
	row("url", e.URL)
	row("state", enabledText(j.Enabled))
	for _, k := range slices.Sorted(maps.Keys(j.Headers)) {
		row("header", k+": "+j.Headers[k])
	}
	def := func(s, d string) string {
		if s == "" {
			return d + " (default)"
		}
		return s
	}
	row("timeout", def(j.Timeout, "30s"))
	attempts := "10 (default)"
	if e.Retry.MaxAttempts > 0 {
		attempts = fmt.Sprint(e.Retry.MaxAttempts)
	}
	row("max attempts", attempts)
	row("max age", def(j.Retry.MaxAge, "24h"))
	row("backoff", def(j.Retry.BackoffBase, "1s")+" to "+def(j.Retry.BackoffCap, "10m"))
	if e.Retry.RetryClientErrors {
		row("other 4xx", "retried")
	} else {
		row("other 4xx", "dead-lettered at once")
	}
	inflight := "16 (default)"
	if e.MaxInFlight > 0 {
		inflight = fmt.Sprint(e.MaxInFlight)
	}
	row("max in flight", inflight)
	row("secrets", strings.Join(j.Secrets, " "))
	row("updated", timefmt.Format(e.UpdatedAt))
	return tw.Flush()
}
