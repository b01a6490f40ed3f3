package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// Consuming over HTTP (pull): a worker in any language leases fire events
// of a consumer group, then acknowledges or releases each by its delivery
// ID, with queue.Consume's retry and dead-letter rules (queue.Lease). The
// routes live under /v1/namespaces/{ns}/groups/{group}/; every one but the
// dead-letter list changes something, so it is a POST (right "write").

// The slugs of the consume routes' problems (see errors.go).
const (
	SlugLeaseLost         = "lease-lost"          // 409: queue.ErrLeaseLost
	SlugDeliveryNotFound  = "delivery-not-found"  // 404: queue.ErrDeliveryNotFound
	SlugInvalidDeliveryID = "invalid-delivery-id" // 422: queue.ErrInvalidDeliveryID
	SlugInvalidConsumer   = "invalid-consumer"    // 422: a group or consumer name queue.ValidateConsumerName refuses
	SlugInvalidDeadLetter = "invalid-dead-letter" // 422: a dead letter ID that is not <shard>-<entry ID>
)

func init() {
	titles[SlugLeaseLost] = "Lease lost"
	titles[SlugDeliveryNotFound] = "Delivery not found"
	titles[SlugInvalidDeliveryID] = "Invalid delivery ID"
	titles[SlugInvalidConsumer] = "Invalid group or consumer name"
	titles[SlugInvalidDeadLetter] = "Invalid dead letter ID"
}

func (h *Handler) consumeRoutes() {
	h.route("POST /v1/namespaces/{ns}/groups/{group}/lease", RightWrite, h.leaseEvents)
	h.route("POST /v1/namespaces/{ns}/groups/{group}/ack", RightWrite, h.ackDeliveries)
	h.route("POST /v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/release", RightWrite, h.releaseDelivery)
	h.route("POST /v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/extend", RightWrite, h.extendDelivery)
	h.route("GET /v1/namespaces/{ns}/groups/{group}/dead-letters", RightRead, h.listDeadLetters)
	h.route("POST /v1/namespaces/{ns}/groups/{group}/dead-letters/{dead}/requeue", RightWrite, h.requeueDeadLetter)
}

// consumeError turns the queue's consume errors into their problems; any
// other error passes unchanged to fail's mapping.
func consumeError(err error, field string) error {
	msg := strings.TrimPrefix(err.Error(), "timerq: ")
	switch {
	case errors.Is(err, queue.ErrLeaseLost):
		return &inputError{http.StatusConflict, SlugLeaseLost, msg, ""}
	case errors.Is(err, queue.ErrDeliveryNotFound):
		return &inputError{http.StatusNotFound, SlugDeliveryNotFound, msg, ""}
	case errors.Is(err, queue.ErrInvalidDeliveryID):
		return &inputError{http.StatusUnprocessableEntity, SlugInvalidDeliveryID, strings.TrimPrefix(msg, "invalid options: "), field}
	}
	return err
}

// groupOf reads the group of r's path, or returns the problem.
func groupOf(r *http.Request) (string, error) {
	g := r.PathValue("group")
	if err := queue.ValidateConsumerName("group", g); err != nil {
		return "", &inputError{http.StatusUnprocessableEntity, SlugInvalidConsumer, strings.TrimPrefix(err.Error(), "timerq: invalid options: "), ""}
	}
	return g, nil
}

// groupPolicyJSON is the group's lease rules, which every request of a
// group should give alike (queue.LeaseOptions).
type groupPolicyJSON struct {
	Lease       *string `json:"lease"`
	MaxAttempts *int    `json:"max_attempts"`
}

func (p groupPolicyJSON) options() (queue.LeaseOptions, error) {
	var o queue.LeaseOptions
	if p.Lease != nil {
		d, err := readDelay(*p.Lease, "/lease")
		if err != nil {
			return o, err
		}
		if d < queue.MinLease || d > queue.MaxLease {
			return o, invalid(SlugInvalidArgument, "/lease", "lease %q is outside %v..%v; choose one longer than any worker takes for an event", *p.Lease, queue.MinLease, queue.MaxLease)
		}
		o.Lease = d
	}
	if p.MaxAttempts != nil {
		if *p.MaxAttempts < 1 {
			return o, invalid(SlugInvalidArgument, "/max_attempts", "max_attempts %d is below 1; leave it out for the default of %d", *p.MaxAttempts, queue.DefaultMaxAttempts)
		}
		o.MaxAttempts = *p.MaxAttempts
	}
	return o, nil
}

type leaseRequestJSON struct {
	Consumer *string `json:"consumer"`
	Count    *int    `json:"count"`
	Wait     *string `json:"wait"`
	Start    *string `json:"start"`
	groupPolicyJSON
}

// DeliveryJSON is one leased event.
type DeliveryJSON struct {
	DeliveryID     string `json:"delivery_id"`
	ID             string `json:"id"`
	DueAt          string `json:"due_at"`
	FiredAt        string `json:"fired_at"`
	Payload        []byte `json:"payload"`
	Attempt        int    `json:"attempt"`
	Shard          int    `json:"shard"`
	StreamID       string `json:"stream_id"`
	LeaseExpiresAt string `json:"lease_expires_at"`
}

type leaseResultJSON struct {
	Deliveries []DeliveryJSON `json:"deliveries"`
}

func (h *Handler) leaseEvents(w http.ResponseWriter, r *http.Request) {
	group, err := groupOf(r)
	var j leaseRequestJSON
	if err == nil {
		err = h.decode(w, r, &j, false)
	}
	var o queue.LeaseOptions
	if err == nil {
		o, err = j.options()
	}
	var wait time.Duration
	switch {
	case err != nil:
	case j.Consumer == nil:
		err = badRequest("/consumer", "the request has no consumer; name the worker, 1-128 characters of [A-Za-z0-9_.:@-]")
	case queue.ValidateConsumerName("consumer", *j.Consumer) != nil:
		err = invalid(SlugInvalidConsumer, "/consumer", "%s", strings.TrimPrefix(queue.ValidateConsumerName("consumer", *j.Consumer).Error(), "timerq: invalid options: "))
	case j.Count != nil && (*j.Count < 1 || *j.Count > queue.MaxBatch):
		err = invalid(SlugInvalidArgument, "/count", "count %d is outside 1..%d", *j.Count, queue.MaxBatch)
	case j.Start != nil && queue.GroupStart(*j.Start).Validate() != nil:
		err = invalid(SlugInvalidArgument, "/start", "%s; leave it out for oldest", strings.TrimPrefix(queue.GroupStart(*j.Start).Validate().Error(), "timerq: invalid options: "))
	case j.Wait != nil:
		if wait, err = readDelay(*j.Wait, "/wait"); err == nil && wait > h.opts.MaxWait {
			err = invalid(SlugInvalidArgument, "/wait", "wait %q is above %v; ask for at most %v, and lease again", *j.Wait, h.opts.MaxWait, h.opts.MaxWait)
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if j.Count != nil {
		o.Count = *j.Count
	}
	if j.Start != nil {
		o.Start = queue.GroupStart(*j.Start)
	}
	o.Block = wait
	h.inNamespace(w, r, func(q *queue.Queue) error {
		ctx, cancel := h.ctx(r)
		if wait > 0 {
			done, err := h.held.Acquire(r)
			if err != nil {
				cancel()
				return err
			}
			defer done()
			cancel()
			ctx, cancel = context.WithTimeout(r.Context(), wait+h.opts.Timeout)
		}
		defer cancel()
		ds, err := q.Lease(ctx, group, *j.Consumer, o)
		if err != nil {
			if r.Context().Err() != nil {
				return nil // the client is gone; its leases run out
			}
			return err
		}
		out := leaseResultJSON{Deliveries: make([]DeliveryJSON, len(ds))}
		for i, d := range ds {
			p := d.Event.Payload
			if p == nil {
				p = []byte{}
			}
			out.Deliveries[i] = DeliveryJSON{DeliveryID: d.DeliveryID, ID: d.Event.ID, DueAt: timefmt.Format(d.Event.Due),
				FiredAt: timefmt.Format(d.Event.FiredAt), Payload: p, Attempt: d.Event.Attempt, Shard: d.Event.Shard,
				StreamID: d.Event.StreamID, LeaseExpiresAt: timefmt.Format(d.LeaseExpires)}
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

type ackRequestJSON struct {
	DeliveryIDs []string `json:"delivery_ids"`
}

type ackResultJSON struct {
	Acked []bool `json:"acked"`
}

func (h *Handler) ackDeliveries(w http.ResponseWriter, r *http.Request) {
	group, err := groupOf(r)
	var j ackRequestJSON
	if err == nil {
		err = h.decode(w, r, &j, false)
	}
	if err == nil && (len(j.DeliveryIDs) == 0 || len(j.DeliveryIDs) > queue.MaxBatch) {
		err = badRequest("/delivery_ids", "delivery_ids holds %d IDs; give 1 to %d", len(j.DeliveryIDs), queue.MaxBatch)
	}
	if err == nil {
		for i, id := range j.DeliveryIDs {
			if _, perr := queue.ParseDeliveryID(id); perr != nil {
				err = consumeError(perr, "/delivery_ids/"+strconv.Itoa(i))
				break
			}
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (ackResultJSON, error) {
		acked, err := q.Ack(ctx, group, j.DeliveryIDs...)
		if err != nil {
			return ackResultJSON{}, consumeError(err, "/delivery_ids")
		}
		return ackResultJSON{Acked: acked}, nil
	})
}

type releaseRequestJSON struct {
	Delay      *string `json:"delay"`
	Error      *string `json:"error"`
	DeadLetter *bool   `json:"dead_letter"`
	groupPolicyJSON
}

type releaseResultJSON struct {
	DeadLetterID *string `json:"dead_letter_id,omitempty"`
	RedeliverAt  *string `json:"redeliver_at,omitempty"`
}

// maxReleaseError bounds the error text a release records.
const maxReleaseError = 4096

func (h *Handler) releaseDelivery(w http.ResponseWriter, r *http.Request) {
	group, err := groupOf(r)
	var j releaseRequestJSON
	if err == nil {
		err = h.decode(w, r, &j, true)
	}
	var o queue.LeaseOptions
	if err == nil {
		o, err = j.options()
	}
	var ro queue.ReleaseOptions
	if err == nil && j.Delay != nil {
		ro.Delay, err = readDelay(*j.Delay, "/delay")
	}
	if err == nil && j.Error != nil {
		if len(*j.Error) > maxReleaseError {
			err = invalid(SlugInvalidArgument, "/error", "error is %d bytes long; keep it to %d", len(*j.Error), maxReleaseError)
		}
		ro.Error = *j.Error
	}
	if j.DeadLetter != nil {
		ro.DeadLetter = *j.DeadLetter
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (releaseResultJSON, error) {
		res, err := q.Release(ctx, group, r.PathValue("delivery"), ro, o)
		if err != nil {
			return releaseResultJSON{}, consumeError(err, "")
		}
		var out releaseResultJSON
		if res.DeadLetterID != "" {
			id := deadLetterID(0, res.DeadLetterID)
			if ref, perr := queue.ParseDeliveryID(r.PathValue("delivery")); perr == nil {
				id = deadLetterID(ref.Shard, res.DeadLetterID)
			}
			out.DeadLetterID = &id
		} else {
			out.RedeliverAt = optTime(res.RedeliverAt)
		}
		return out, nil
	})
}

type extendRequestJSON struct {
	LeaseFor *string `json:"lease_for"`
	groupPolicyJSON
}

type extendResultJSON struct {
	LeaseExpiresAt string `json:"lease_expires_at"`
}

func (h *Handler) extendDelivery(w http.ResponseWriter, r *http.Request) {
	group, err := groupOf(r)
	var j extendRequestJSON
	if err == nil {
		err = h.decode(w, r, &j, true)
	}
	var o queue.LeaseOptions
	if err == nil {
		o, err = j.options()
	}
	var d time.Duration
	if err == nil && j.LeaseFor != nil {
		d, err = readDelay(*j.LeaseFor, "/lease_for")
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (extendResultJSON, error) {
		until, err := q.ExtendLease(ctx, group, r.PathValue("delivery"), d, o)
		if err != nil {
			return extendResultJSON{}, consumeError(err, "")
		}
		return extendResultJSON{LeaseExpiresAt: timefmt.Format(until)}, nil
	})
}

// deadLetterID is the API's ID of a dead letter: its shard and its entry
// ID in that shard's dead-letter stream, "<shard>-<ms>-<seq>".
func deadLetterID(shard int, streamID string) string { return strconv.Itoa(shard) + "-" + streamID }

// parseDeadLetterID reads deadLetterID's form.
func parseDeadLetterID(s string) (int, string, error) {
	parts := strings.Split(s, "-")
	bad := invalid(SlugInvalidDeadLetter, "", "dead letter ID %q is not <shard>-<entry ID> such as 0-1700000000000-0; use one the dead-letter list returned", s)
	if len(parts) != 3 {
		return 0, "", bad
	}
	var n [3]uint64
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil || strconv.FormatUint(v, 10) != p {
			return 0, "", bad
		}
		n[i] = v
	}
	if n[0] >= queue.MaxShards {
		return 0, "", bad
	}
	return int(n[0]), parts[1] + "-" + parts[2], nil
}

// DeadLetterJSON is one dead letter of a group.
type DeadLetterJSON struct {
	DeadLetterID string `json:"dead_letter_id"`
	ID           string `json:"id"`
	DueAt        string `json:"due_at"`
	FiredAt      string `json:"fired_at"`
	Payload      []byte `json:"payload"`
	Error        string `json:"error"`
	Attempts     int    `json:"attempts"`
	Consumer     string `json:"consumer"`
	Shard        int    `json:"shard"`
	FireStreamID string `json:"fire_stream_id"`
}

type deadLetterPageJSON struct {
	DeadLetters []DeadLetterJSON `json:"dead_letters"`
	NextCursor  string           `json:"next_cursor"`
}

// listDeadLetters pages through the namespace's dead letters, oldest
// first, keeping the group's: a page may hold fewer than limit, even none,
// while next_cursor goes on.
func (h *Handler) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	group, err := groupOf(r)
	var v url.Values
	if err == nil {
		v, err = query(r, "limit", "cursor")
	}
	limit := 100
	if err == nil {
		var n int
		if n, err = queryLimit(v); n > 0 {
			limit = n
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q, release, ok := h.queue(w, r)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := h.ctx(r)
	defer cancel()
	cursor := ""
	if c := v["cursor"]; len(c) > 0 {
		cursor = c[0]
	}
	page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: limit, Cursor: cursor})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := deadLetterPageJSON{DeadLetters: []DeadLetterJSON{}, NextCursor: page.NextCursor}
	for _, d := range page.DeadLetters {
		if d.Group != group {
			continue
		}
		p := d.Event.Payload
		if p == nil {
			p = []byte{}
		}
		out.DeadLetters = append(out.DeadLetters, DeadLetterJSON{DeadLetterID: deadLetterID(d.Event.Shard, d.Event.StreamID),
			ID: d.Event.ID, DueAt: timefmt.Format(d.Event.Due), FiredAt: timefmt.Format(d.Event.FiredAt), Payload: p,
			Error: d.Error, Attempts: d.Attempts, Consumer: d.Consumer, Shard: d.Event.Shard, FireStreamID: d.FireStreamID})
	}
	writeJSON(w, http.StatusOK, out)
}

type requeueResultJSON struct {
	StreamID string `json:"stream_id"`
}

// requeueDeadLetter moves one dead letter back onto its shard's fire
// stream, for the group that dead-lettered it.
func (h *Handler) requeueDeadLetter(w http.ResponseWriter, r *http.Request) {
	_, err := groupOf(r)
	var shard int
	var id string
	if err == nil {
		shard, id, err = parseDeadLetterID(r.PathValue("dead"))
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (requeueResultJSON, error) {
		sid, err := q.Deliveries().Requeue(ctx, shard, id)
		if errors.Is(err, queue.ErrInvalidOptions) {
			err = invalid(SlugInvalidDeadLetter, "", "%s", fmt.Sprint(strings.TrimPrefix(err.Error(), "timerq: invalid options: ")))
		}
		return requeueResultJSON{StreamID: sid}, err
	})
}
