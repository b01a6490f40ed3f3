package ctl

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/queue"
)

func (r *runner) debounceCommand() *cli.Command {
	return &cli.Command{
		Name: "debounce",
		Usage: "create KEY's window timer due --delay from now, or push the open one back, " +
			"never past --max-wait after the window opened",
		ArgsUsage: "KEY --delay DURATION --max-wait DURATION [--payload TEXT | --payload-file PATH|-] [--keep-first] [--deliver NAME]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "delay", Usage: "due `DURATION` after this call by the Redis server's clock, e.g. 5s"},
			&cli.StringFlag{Name: "max-wait", Usage: "the window's timer is never due later than `DURATION` after the window opened, e.g. 1m"},
			&cli.StringFlag{Name: "payload", Aliases: []string{"p"}, Usage: "payload `TEXT` (the newest call's wins)"},
			&cli.StringFlag{Name: "payload-file", Usage: "read the payload from `PATH`, or stdin for -"},
			&cli.BoolFlag{Name: "keep-first", Usage: "leave the window's payload (and endpoint) as it is; only move its timer"},
			&cli.StringFlag{Name: "deliver", Usage: "deliver the fire to the namespace's endpoint `NAME` (timerctl endpoints); it goes with the payload"},
		},
		Action: r.debounce,
	}
}

func (r *runner) debounce(c *cli.Context) error {
	key, err := oneArg(c, "the debounce key")
	if err != nil {
		return err
	}
	var o queue.DebounceOptions
	if !c.IsSet("delay") || !c.IsSet("max-wait") {
		return usageErr("missing --delay or --max-wait", "give both, e.g. --delay 5s --max-wait 1m")
	}
	if o.Delay, err = parseIn("delay", c.String("delay")); err != nil {
		return err
	}
	if o.MaxWait, err = parseIn("max-wait", c.String("max-wait")); err != nil {
		return err
	}
	if o.Payload, err = r.payloadWithin(c); err != nil {
		return err
	}
	o.KeepFirst = c.Bool("keep-first")
	if c.IsSet("deliver") {
		if err := queue.ValidateEndpointName(c.String("deliver")); err != nil {
			return err
		}
		o.Endpoint = c.String("deliver")
	}
	return r.once(c, func(ctx context.Context, s *session) error {
		res, err := s.q.Debounce(ctx, key, o)
		if err != nil {
			return err
		}
		now := r.o.Now()
		return r.emit(s.g, api.ToDebounceResultJSON(res), func(w io.Writer) error { // the HTTP API's answer
			return writeRecord(w, res.Timer, now, fmt.Sprintf("%s; the window's deadline is %s", res.Outcome, fmtTime(res.Deadline, now)))
		})
	})
}
