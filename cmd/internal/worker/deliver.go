package worker

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/queue"
)

// DeliverConfig is push delivery's part of Config: the --deliver flags.
type DeliverConfig struct {
	// Enabled runs a dispatch.Dispatcher per served namespace (--deliver):
	// fires of timers that name an endpoint are POSTed to it.
	Enabled bool
	// Allow is --deliver-allow: CIDRs (10.1.0.0/16), addresses
	// (127.0.0.1) and host names (hooks.internal) the SSRF guard lets
	// deliveries reach though they are private or reserved. The HTTP API
	// served by the same process admits endpoint URLs in the same ranges.
	Allow []string
	// Group is the consumer group the dispatchers of a namespace share
	// (--deliver-group); "" means dispatch.DefaultGroup.
	Group string
	// MaxOutstanding bounds the fires each namespace's dispatcher holds at
	// once, under way or waiting for their endpoint
	// (--deliver-max-in-flight); 0 means dispatch.DefaultMaxOutstanding.
	MaxOutstanding int
	// Lease is the dispatchers' lease (--deliver-lease); 0 means
	// dispatch.DefaultDispatchLease. Every replica must use the same.
	Lease time.Duration
	// MaxRedirects is how many redirects a delivery follows, each hop
	// checked (--deliver-max-redirects); 0 follows none.
	MaxRedirects int
}

// guard reads the allow list into the SSRF guard, or returns a usage
// error naming the entry it cannot read; api says the process serves the
// HTTP API, whose endpoint check takes the allow list too.
func (c DeliverConfig) guard(api bool) (*deliver.Guard, error) {
	g := &deliver.Guard{MaxRedirects: c.MaxRedirects}
	if c.MaxRedirects < 0 || c.MaxRedirects > deliver.MaxRedirects {
		return nil, cliconf.Usage(fmt.Sprintf("--deliver-max-redirects %d is outside 0-%d", c.MaxRedirects, deliver.MaxRedirects),
			"give 0 (follow none, the default) up to "+fmt.Sprint(deliver.MaxRedirects))
	}
	for _, raw := range c.Allow {
		for _, s := range strings.Split(raw, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			if p, err := netip.ParsePrefix(s); err == nil {
				g.Allow = append(g.Allow, p.Masked())
				continue
			}
			if a, err := netip.ParseAddr(s); err == nil {
				g.Allow = append(g.Allow, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			if strings.ContainsAny(s, "/:[]@ ") || !strings.Contains(s, ".") && !strings.EqualFold(s, "localhost") {
				return nil, cliconf.Usage(fmt.Sprintf("--deliver-allow (TIMERQ_DELIVER_ALLOW) entry %q is neither a CIDR, an address nor a host name", s),
					"give ranges such as 10.1.0.0/16 or 127.0.0.1/32, addresses, or host names such as hooks.internal, separated by commas")
			}
			g.AllowHosts = append(g.AllowHosts, s)
		}
	}
	// --deliver-allow also sets what the API admits, so an API-only
	// replica may take it without delivering.
	if (c.Group != "" || c.MaxOutstanding != 0 || c.Lease != 0 || len(c.Allow) > 0 && !api || c.MaxRedirects != 0) && !c.Enabled {
		return nil, cliconf.Usage("a --deliver-* flag is set but --deliver is not", "give --deliver to run push delivery, or drop the --deliver-* flags")
	}
	if c.MaxOutstanding < 0 {
		return nil, cliconf.Usage(fmt.Sprintf("--deliver-max-in-flight %d is negative", c.MaxOutstanding),
			fmt.Sprintf("give a positive bound, e.g. %d (0 for that default)", dispatch.DefaultMaxOutstanding))
	}
	if c.Lease != 0 && (c.Lease < queue.MinLease || c.Lease > queue.MaxLease) {
		return nil, cliconf.Usage(fmt.Sprintf("--deliver-lease %v is outside %v-%v", c.Lease, queue.MinLease, queue.MaxLease),
			"give one above the longest endpoint timeout, e.g. 1m (the default)")
	}
	if c.Group != "" {
		if err := queue.ValidateConsumerName("group", c.Group); err != nil {
			return nil, cliconf.Usage("--deliver-group (TIMERQ_DELIVER_GROUP): "+err.Error(), "use 1-64 characters of A-Z a-z 0-9 _ . -, e.g. "+dispatch.DefaultGroup)
		}
	}
	return g, nil
}

// newDispatcher is the dispatcher of q's namespace.
func newDispatcher(q *queue.Queue, c DeliverConfig, sender *deliver.Sender, log *slog.Logger) *dispatch.Dispatcher {
	return &dispatch.Dispatcher{
		Queue:          q,
		Group:          c.Group,
		Sender:         sender,
		Lease:          c.Lease,
		MaxOutstanding: c.MaxOutstanding,
		OnError: func(err error) {
			log.Warn("timerq: delivery", "namespace", q.Namespace(), "err", err)
		},
	}
}
