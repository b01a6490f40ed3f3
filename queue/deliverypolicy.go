package queue

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/keyspace"
)

// ErrTimerURLsOff means a timer, batch item or schedule gave its own
// delivery URL (NewTimer.URL, Recurring.URL) in a namespace whose delivery
// policy does not allow timer URLs. Nothing was written.
var ErrTimerURLsOff = errors.New("timerq: timer URLs are not allowed in this namespace")

// DeliveryPolicy is a namespace's delivery policy, stored once per
// namespace (Deliveries.SetPolicy). The zero value is the default.
type DeliveryPolicy struct {
	// AllowTimerURLs lets a timer, batch item or schedule that names an
	// endpoint give a URL of its own (NewTimer.URL): its fires go there,
	// signed with the endpoint's secrets, with its headers, timeout, retry
	// policy and in-flight limit. Off by default: a timer URL lets whoever
	// may schedule a timer choose where its payload is sent. Turning it
	// off refuses new timer URLs, and dispatchers dead-letter the fires of
	// timers that already have one (redrivable once it is on again).
	AllowTimerURLs bool `json:"allow_timer_urls"`
}

// timerURLsField is the delivery policy hash's field for AllowTimerURLs.
const timerURLsField = "allow_timer_urls"

// Policy returns the namespace's delivery policy: the default (all
// off) if none was set.
func (d Deliveries) Policy(ctx context.Context) (DeliveryPolicy, error) {
	q := d.q
	v, err := q.rdb.HGet(ctx, keyspace.Namespace(q.opts.Namespace).DeliveryPolicy(), timerURLsField).Result()
	if errors.Is(err, redis.Nil) {
		return DeliveryPolicy{}, nil
	}
	if err != nil {
		return DeliveryPolicy{}, errorf("read the delivery policy: %w", q.redisError(err))
	}
	return DeliveryPolicy{AllowTimerURLs: v == "1"}, nil
}

// SetPolicy stores the namespace's delivery policy. It applies to
// timers scheduled afterwards at once, and to dispatchers within a second
// (each reads it at most once a second, when a fire has a timer URL).
func (d Deliveries) SetPolicy(ctx context.Context, p DeliveryPolicy) error {
	q := d.q
	v := "0"
	if p.AllowTimerURLs {
		v = "1"
	}
	if err := q.rdb.HSet(ctx, keyspace.Namespace(q.opts.Namespace).DeliveryPolicy(), timerURLsField, v).Err(); err != nil {
		return errorf("set the delivery policy: %w", q.redisError(err))
	}
	return nil
}

// ValidateTimerURL checks a timer's own delivery URL (NewTimer.URL) as a
// dispatcher will take it: an absolute http or https URL with a host, no
// user information or fragment, no cloud metadata address, and no address
// literal in a private or reserved range unless allow admits it
// (deliver.ValidateURL). Host names are judged at every connection by the
// dispatcher's SSRF guard. Errors wrap ErrInvalidOptions.
func ValidateTimerURL(raw string, allow []netip.Prefix) error {
	if strings.ContainsAny(raw, " \t\r\n") {
		return fmt.Errorf("%w: the delivery URL holds white space; percent-encode it", ErrInvalidOptions)
	}
	if _, err := deliver.ValidateURL(raw, &deliver.Guard{Allow: allow}); err != nil {
		return fmt.Errorf("%w: the delivery URL: %s", ErrInvalidOptions, strings.TrimPrefix(err.Error(), "timerq: deliver: "))
	}
	return nil
}

// deliverArg is what the deliveries hash keeps for a timer that delivers:
// the endpoint's name, and after a space the timer's own URL if it has
// one. Endpoint names never hold a space, and a timer URL never does
// (ValidateTimerURL), so the first space splits them.
func deliverArg(endpoint, url string) string {
	if endpoint == "" || url == "" {
		return endpoint
	}
	return endpoint + " " + url
}

// splitDeliver splits a deliveries hash value (or a fire event's endpoint
// field) into the endpoint's name and the timer's URL, leaving out a flow
// key (deliveryOf).
func splitDeliver(v string) (endpoint, url string) {
	v, _, _ = strings.Cut(v, "\x00")
	endpoint, url, _ = strings.Cut(v, " ")
	return endpoint, url
}

// checkTimerURLs refuses timer URLs when the namespace's policy does not
// allow them: one read, only when some timer has a URL.
func (q *Queue) checkTimerURLs(ctx context.Context, what string) error {
	p, err := q.Deliveries().Policy(ctx)
	if err != nil {
		return err
	}
	if !p.AllowTimerURLs {
		return fmt.Errorf("%w: %s gives a delivery URL, and namespace %q's delivery policy does not allow timer URLs, so nothing was written; name an endpoint without a URL, or allow them (Deliveries().SetPolicy, or PUT /v1/namespaces/%s/delivery-policy)",
			ErrTimerURLsOff, what, q.opts.Namespace, q.opts.Namespace)
	}
	return nil
}
