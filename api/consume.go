package api

import (
	"context"
	"errors"
	"net/http"
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
	h.route("POST /v1/namespaces/{ns}/groups/{group}/lease", RightWrite, exec(h, h.leaseEvents))
	h.route("POST /v1/namespaces/{ns}/groups/{group}/ack", RightWrite, exec(h, ackDeliveries))
	h.route("POST /v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/release", RightWrite, exec(h, releaseDelivery))
	h.route("POST /v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/extend", RightWrite, exec(h, extendDelivery))
	h.route("GET /v1/namespaces/{ns}/groups/{group}/dead-letters", RightRead, exec(h, listDeadLetters))
	h.route("POST /v1/namespaces/{ns}/groups/{group}/dead-letters/{dead}/requeue", RightWrite, exec(h, requeueDeadLetter))
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

// invalidConsumer is a group or consumer name queue.ValidateConsumerName
// refused, as a problem.
func invalidConsumer(err error, field string) error {
	return invalid(SlugInvalidConsumer, field, "%s", strings.TrimPrefix(err.Error(), "timerq: invalid options: "))
}

// groupPolicy is the group of a consume route's path, and the group's
// lease rules from its body: what every consume request reads.
type groupPolicy struct {
	group string
	o     queue.LeaseOptions
}

// readGroup reads the group of r's path and, when j is not nil, r's body
// into j, and j's lease rules (p).
func (g *groupPolicy) readGroup(h *Handler, w http.ResponseWriter, r *http.Request, j any, p *groupPolicyJSON, optional bool) error {
	g.group = r.PathValue("group")
	if err := queue.ValidateConsumerName("group", g.group); err != nil {
		return invalidConsumer(err, "")
	}
	if j == nil {
		return nil
	}
	if err := h.decode(w, r, j, optional); err != nil {
		return err
	}
	var err error
	g.o, err = p.options()
	return err
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
	// MetaJSON is the timer's owner and the epoch it was scheduled under,
	// its labels and its deadline, as the fire carries them.
	MetaJSON
}

type leaseResultJSON struct {
	Deliveries []DeliveryJSON `json:"deliveries"`
}

// leaseRequest is the path and body of POST .../lease. It keeps r, whose
// client holds a slot (Options.MaxHeld) while it waits.
type leaseRequest struct {
	groupPolicy
	consumer string
	r        *http.Request
}

func (req *leaseRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j leaseRequestJSON
	if err := req.readGroup(h, w, r, &j, &j.groupPolicyJSON, false); err != nil {
		return err
	}
	if j.Consumer == nil {
		return badRequest("/consumer", "the request has no consumer; name the worker, 1-128 characters of [A-Za-z0-9_.:@-]")
	}
	if err := queue.ValidateConsumerName("consumer", *j.Consumer); err != nil {
		return invalidConsumer(err, "/consumer")
	}
	if j.Count != nil {
		if *j.Count < 1 || *j.Count > queue.MaxBatch {
			return invalid(SlugInvalidArgument, "/count", "count %d is outside 1..%d", *j.Count, queue.MaxBatch)
		}
		req.o.Count = *j.Count
	}
	if j.Start != nil {
		req.o.Start = queue.GroupStart(*j.Start)
		if err := req.o.Start.Validate(); err != nil {
			return invalid(SlugInvalidArgument, "/start", "%s; leave it out for oldest", strings.TrimPrefix(err.Error(), "timerq: invalid options: "))
		}
	}
	req.consumer, req.r = *j.Consumer, r
	if j.Wait == nil {
		return nil
	}
	var err error
	if req.o.Block, err = readDelay(*j.Wait, "/wait"); err == nil && req.o.Block > h.opts.MaxWait {
		return invalid(SlugInvalidArgument, "/wait", "wait %q is above %v; ask for at most %v, and lease again", *j.Wait, h.opts.MaxWait, h.opts.MaxWait)
	}
	return err
}

func (h *Handler) leaseEvents(ctx context.Context, q *queue.Queue, req *leaseRequest) (any, error) {
	if req.o.Block > 0 {
		done, err := h.held.Acquire(req.r)
		if err != nil {
			return nil, err
		}
		defer done()
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(req.r.Context(), req.o.Block+h.opts.Timeout)
		defer cancel()
	}
	ds, err := q.Lease(ctx, req.group, req.consumer, req.o)
	if err != nil {
		return nil, err // when the client is gone, its leases run out
	}
	out := leaseResultJSON{Deliveries: make([]DeliveryJSON, len(ds))}
	for i, d := range ds {
		out.Deliveries[i] = DeliveryJSON{DeliveryID: d.DeliveryID, ID: d.Event.ID, DueAt: timefmt.Format(d.Event.Due),
			FiredAt: timefmt.Format(d.Event.FiredAt), Payload: WireBytes(d.Event.Payload), Attempt: d.Event.Attempt, Shard: d.Event.Shard,
			StreamID: d.Event.StreamID, LeaseExpiresAt: timefmt.Format(d.LeaseExpires),
			MetaJSON: ToMetaJSON(d.Event.Owner, d.Event.Epoch, d.Event.Labels, d.Event.Deadline)}
	}
	return out, nil
}

type ackRequestJSON struct {
	DeliveryIDs []string `json:"delivery_ids"`
}

type ackResultJSON struct {
	Acked []bool `json:"acked"`
}

// ackRequest is the path and body of POST .../ack.
type ackRequest struct {
	groupPolicy
	ids []string
}

func (req *ackRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	if err := req.readGroup(h, w, r, nil, nil, false); err != nil {
		return err
	}
	var j ackRequestJSON
	if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	if len(j.DeliveryIDs) == 0 || len(j.DeliveryIDs) > queue.MaxBatch {
		return badRequest("/delivery_ids", "delivery_ids holds %d IDs; give 1 to %d", len(j.DeliveryIDs), queue.MaxBatch)
	}
	for i, id := range j.DeliveryIDs {
		if _, err := queue.ParseDeliveryID(id); err != nil {
			return consumeError(err, "/delivery_ids/"+strconv.Itoa(i))
		}
	}
	req.ids = j.DeliveryIDs
	return nil
}

func ackDeliveries(ctx context.Context, q *queue.Queue, req *ackRequest) (any, error) {
	acked, err := q.Ack(ctx, req.group, req.ids...)
	if err != nil {
		return nil, consumeError(err, "/delivery_ids")
	}
	return ackResultJSON{Acked: acked}, nil
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

// releaseRequest is the path and optional body of POST
// .../deliveries/{delivery}/release.
type releaseRequest struct {
	groupPolicy
	delivery string
	ro       queue.ReleaseOptions
}

func (req *releaseRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j releaseRequestJSON
	if err := req.readGroup(h, w, r, &j, &j.groupPolicyJSON, true); err != nil {
		return err
	}
	var err error
	if j.Delay != nil {
		if req.ro.Delay, err = readDelay(*j.Delay, "/delay"); err != nil {
			return err
		}
	}
	if j.Error != nil {
		if len(*j.Error) > maxReleaseError {
			return invalid(SlugInvalidArgument, "/error", "error is %d bytes long; keep it to %d", len(*j.Error), maxReleaseError)
		}
		req.ro.Error = *j.Error
	}
	setGiven(&req.ro.DeadLetter, j.DeadLetter)
	req.delivery = r.PathValue("delivery")
	return nil
}

func releaseDelivery(ctx context.Context, q *queue.Queue, req *releaseRequest) (any, error) {
	res, err := q.Release(ctx, req.group, req.delivery, req.ro, req.o)
	if err != nil {
		return nil, consumeError(err, "")
	}
	var out releaseResultJSON
	if res.DeadLetterID != "" {
		id := deadLetterID(0, res.DeadLetterID)
		if ref, perr := queue.ParseDeliveryID(req.delivery); perr == nil {
			id = deadLetterID(ref.Shard, res.DeadLetterID)
		}
		out.DeadLetterID = &id
	} else {
		out.RedeliverAt = optTime(res.RedeliverAt)
	}
	return out, nil
}

type extendRequestJSON struct {
	LeaseFor *string `json:"lease_for"`
	groupPolicyJSON
}

type extendResultJSON struct {
	LeaseExpiresAt string `json:"lease_expires_at"`
}

// extendRequest is the path and optional body of POST
// .../deliveries/{delivery}/extend.
type extendRequest struct {
	groupPolicy
	delivery string
	d        time.Duration
}

func (req *extendRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j extendRequestJSON
	if err := req.readGroup(h, w, r, &j, &j.groupPolicyJSON, true); err != nil {
		return err
	}
	req.delivery = r.PathValue("delivery")
	if j.LeaseFor == nil {
		return nil
	}
	var err error
	req.d, err = readDelay(*j.LeaseFor, "/lease_for")
	return err
}

func extendDelivery(ctx context.Context, q *queue.Queue, req *extendRequest) (any, error) {
	until, err := q.ExtendLease(ctx, req.group, req.delivery, req.d, req.o)
	if err != nil {
		return nil, consumeError(err, "")
	}
	return extendResultJSON{LeaseExpiresAt: timefmt.Format(until)}, nil
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
	// MetaJSON is the timer's owner and the epoch it was scheduled under,
	// its labels and its deadline, as the fire carried them.
	MetaJSON
}

type deadLetterPageJSON struct {
	DeadLetters []DeadLetterJSON `json:"dead_letters"`
	NextCursor  string           `json:"next_cursor"`
}

// deadLettersRequest is the path and query of GET .../dead-letters.
type deadLettersRequest struct {
	groupPolicy
	pageRequest
}

func (req *deadLettersRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	if err := req.readGroup(h, w, r, nil, nil, false); err != nil {
		return err
	}
	if err := req.pageRequest.read(h, w, r); err != nil {
		return err
	}
	if req.limit == 0 {
		req.limit = 100
	}
	return nil
}

// listDeadLetters pages through the namespace's dead letters, oldest
// first, keeping the group's: a page may hold fewer than limit, even none,
// while next_cursor goes on.
func listDeadLetters(ctx context.Context, q *queue.Queue, req *deadLettersRequest) (any, error) {
	page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: req.limit, Cursor: req.cursor})
	if err != nil {
		return nil, err
	}
	out := deadLetterPageJSON{DeadLetters: []DeadLetterJSON{}, NextCursor: page.NextCursor}
	for _, d := range page.DeadLetters {
		if d.Group != req.group {
			continue
		}
		out.DeadLetters = append(out.DeadLetters, DeadLetterJSON{DeadLetterID: deadLetterID(d.Event.Shard, d.Event.StreamID),
			ID: d.Event.ID, DueAt: timefmt.Format(d.Event.Due), FiredAt: timefmt.Format(d.Event.FiredAt), Payload: WireBytes(d.Event.Payload),
			Error: d.Error, Attempts: d.Attempts, Consumer: d.Consumer, Shard: d.Event.Shard, FireStreamID: d.FireStreamID,
			MetaJSON: ToMetaJSON(d.Event.Owner, d.Event.Epoch, d.Event.Labels, d.Event.Deadline)})
	}
	return out, nil
}

type requeueResultJSON struct {
	StreamID string `json:"stream_id"`
}

// requeueRequest is the path of POST .../dead-letters/{dead}/requeue.
type requeueRequest struct {
	groupPolicy
	shard int
	id    string
}

func (req *requeueRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	if err := req.readGroup(h, w, r, nil, nil, false); err != nil {
		return err
	}
	var err error
	req.shard, req.id, err = parseDeadLetterID(r.PathValue("dead"))
	return err
}

// requeueDeadLetter moves one dead letter back onto its shard's fire
// stream, for the group that dead-lettered it.
func requeueDeadLetter(ctx context.Context, q *queue.Queue, req *requeueRequest) (any, error) {
	sid, err := q.Deliveries().Requeue(ctx, req.shard, req.id)
	if errors.Is(err, queue.ErrInvalidOptions) {
		err = invalid(SlugInvalidDeadLetter, "", "%s", strings.TrimPrefix(err.Error(), "timerq: invalid options: "))
	}
	return requeueResultJSON{StreamID: sid}, err
}
