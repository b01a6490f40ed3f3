package ctl

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/timerq/timerq/queue"
)

// deliveryPolicyCommand is "timerctl delivery-policy": show the
// namespace's delivery policy (queue.DeliveryPolicy), or change it.
func (r *runner) deliveryPolicyCommand() *cli.Command {
	return &cli.Command{
		Name:      "delivery-policy",
		Usage:     "show or set the namespace's delivery policy: whether timers may give delivery URLs of their own",
		ArgsUsage: "[--allow-timer-urls=true|false]",
		Description: `Without a flag, prints the policy. --allow-timer-urls=true lets a timer, batch item
or schedule that names an endpoint give a URL of its own (timerctl schedule --deliver NAME
--deliver-url URL, the API's deliver.url): its fires go there, signed with the endpoint's
secrets. Off by default. Turning it off refuses new timer URLs, and dispatchers
dead-letter the fires of timers that already have one (redrive them once it is on).`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "allow-timer-urls", Usage: "let timers give delivery URLs of their own (true or false)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr(fmt.Sprintf("delivery-policy takes no argument, not %q", c.Args().Slice()), helpFix(c))
			}
			return r.once(c, func(ctx context.Context, s *session) error {
				if c.IsSet("allow-timer-urls") {
					if err := s.q.Deliveries().SetPolicy(ctx, queue.DeliveryPolicy{AllowTimerURLs: c.Bool("allow-timer-urls")}); err != nil {
						return err
					}
				}
				p, err := s.q.Deliveries().Policy(ctx)
				if err != nil {
					return err
				}
				return r.emitf(s.g, p, "allow-timer-urls  %v\n", p.AllowTimerURLs)
			})
		},
	}
}
