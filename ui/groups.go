package ui

// The consumer groups page and dead-letter requeue.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/queue"
)

type groupsData struct {
	Now    time.Time
	Groups []groupView
	Dead   []queue.DeadLetter
	Count  int64
	Next   string
	// Sharded shows each dead letter's shard.
	Sharded bool
}

func (h *Handler) groups(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	d := groupsData{Now: time.Now().UTC()}
	groups, err := h.q.Inspect().Groups(ctx)
	if h.failed(w, r, err) {
		return
	}
	for _, g := range groups {
		cs, err := h.q.Inspect().Consumers(ctx, g.Name)
		if h.failed(w, r, err) {
			return
		}
		d.Groups = append(d.Groups, groupView{GroupInfo: g, Members: consumerViews(cs, d.Now)})
	}
	after := r.URL.Query().Get("after")
	if after != "" && !validCursor(after) {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("after %q is not a dead-letter cursor", after))
		return
	}
	dead, err := h.q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: listPage, Cursor: after})
	if h.failed(w, r, err) {
		return
	}
	d.Dead = dead.DeadLetters
	if dead.NextCursor != "" {
		d.Next = h.link("/groups", "after", dead.NextCursor)
	}
	if d.Count, err = h.q.Deliveries().DeadLetterCount(ctx); h.failed(w, r, err) {
		return
	}
	shards, _ := h.q.Inspect().Shards(ctx) // read by the calls above
	d.Sharded = shards > 1
	h.render(w, r, http.StatusOK, "groups", "Consumer groups", d)
}

// groupView is a consumer group with its consumers.
type groupView struct {
	queue.GroupInfo
	Members []consumerView
}

// consumerView is one consumer, with its times made absolute and a word on
// whether it looks alive.
type consumerView struct {
	queue.ConsumerInfo
	// LastSeen is Now-Idle: on Redis 7.2+ its last read or claim, on 7.0
	// its last delivery (SeenIsDelivery).
	LastSeen       time.Time
	SeenIsDelivery bool
	// LastDelivery is Now-Inactive, zero when it never got one or Redis
	// does not say (before 7.2).
	LastDelivery time.Time
	Stale        bool
	Status       string
}

// consumerStale is how long a consumer may go unseen before the page calls
// it stopped: Consume reads at least every ConsumeOptions.Block (1 s by
// default), and a handler that runs longer holds it no longer than this.
const consumerStale = time.Minute

func consumerViews(cs []queue.ConsumerInfo, now time.Time) []consumerView {
	out := make([]consumerView, 0, len(cs))
	for _, c := range cs {
		v := consumerView{ConsumerInfo: c, SeenIsDelivery: !c.InactiveKnown}
		if c.Idle >= 0 {
			v.LastSeen = now.Add(-c.Idle)
		}
		if c.InactiveKnown && c.Inactive >= 0 {
			v.LastDelivery = now.Add(-c.Inactive)
		}
		switch {
		case c.Idle < 0:
			v.Status = "unknown: the server does not report idle times"
		case c.InactiveKnown && c.Idle > consumerStale:
			v.Stale, v.Status = true, "stopped or dead: no read for "+formatDur(c.Idle)
		case c.InactiveKnown:
			v.Status = "reading"
		case c.Pending > 0 && c.Idle > queue.DefaultClaimIdle:
			v.Stale, v.Status = true, "stopped or dead? it holds "+strconv.FormatInt(c.Pending, 10)+" deliveries untouched for "+formatDur(c.Idle)+
				"; other consumers reclaim them after ClaimIdle"
		case c.Idle > consumerStale:
			v.Status = "no delivery for " + formatDur(c.Idle) + ": idle, or stopped (Redis before 7.2 cannot tell which)"
		default:
			v.Status = "active"
		}
		out = append(out, v)
	}
	return out
}

// streamTime is the time in a stream entry ID ("<ms>-<seq>"): when the
// entry was added, by the server's clock. Zero for "0-0" or no ID.
func streamTime(id string) time.Time {
	msPart, _, _ := strings.Cut(id, "-")
	ms, err := strconv.ParseInt(msPart, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// deadLetterRef reads the dead letter a request names: its entry ID, and
// the shard whose dead-letter stream holds it (0 when absent, as in a
// namespace of one shard).
func deadLetterRef(v url.Values) (shard int, id string, err error) {
	id = v.Get("id")
	if !streamID.MatchString(id) {
		return 0, "", fmt.Errorf("%q is not a dead letter ID", id)
	}
	if s := v.Get("shard"); s != "" {
		if shard, err = strconv.Atoi(s); err != nil || shard < 0 {
			return 0, "", fmt.Errorf("%q is not a shard number", s)
		}
	}
	return shard, id, nil
}

func (h *Handler) confirmRequeue(w http.ResponseWriter, r *http.Request) {
	shard, id, err := deadLetterRef(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	q := "Requeue dead letter " + id
	if n, _ := h.q.Inspect().Shards(r.Context()); n > 1 {
		q += " of shard " + strconv.Itoa(shard)
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm", confirmData{
		Action: "requeue", ID: id, Shard: strconv.Itoa(shard), Post: h.link("/dead/requeue"), Back: h.link("/groups"),
		Question: q + "? The group that gave up on it gets it again as a new delivery.",
	})
}

func (h *Handler) requeue(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	shard, id, err := deadLetterRef(r.PostForm)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if _, err := h.q.Deliveries().Requeue(ctx, shard, id); h.failed(w, r, err) {
		return
	}
	h.log.Info("timerq ui: dead letter requeued", "id", id, "shard", shard, "namespace", h.q.Namespace())
	http.Redirect(w, r, h.link("/groups", "done", "requeued"), http.StatusSeeOther)
}
