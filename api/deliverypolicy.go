package api

import (
	"net/http"

	"github.com/timerq/timerq/queue"
)

// DeliveryPolicyJSON is a namespace's delivery policy
// (queue.DeliveryPolicy), the body and answer of
// /v1/namespaces/{ns}/delivery-policy.
type DeliveryPolicyJSON struct {
	// AllowTimerURLs lets a timer, batch item or schedule give a URL of
	// its own beside its endpoint (deliver.url). Off by default.
	AllowTimerURLs bool `json:"allow_timer_urls"`
}

// deliveryPolicyInJSON is the body of PUT .../delivery-policy.
type deliveryPolicyInJSON struct {
	AllowTimerURLs *bool `json:"allow_timer_urls"`
}

func (h *Handler) getDeliveryPolicy(w http.ResponseWriter, r *http.Request) {
	q, release, ok := h.queue(w, r)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := h.ctx(r)
	defer cancel()
	p, err := q.Deliveries().Policy(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, DeliveryPolicyJSON{AllowTimerURLs: p.AllowTimerURLs})
}

func (h *Handler) putDeliveryPolicy(w http.ResponseWriter, r *http.Request) {
	q, release, ok := h.queue(w, r)
	if !ok {
		return
	}
	defer release()
	var j deliveryPolicyInJSON
	if err := h.decode(w, r, &j, false); err != nil {
		h.fail(w, r, err)
		return
	}
	if j.AllowTimerURLs == nil {
		h.fail(w, r, badRequest("/allow_timer_urls", "the policy has no allow_timer_urls; give true or false"))
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	p := queue.DeliveryPolicy{AllowTimerURLs: *j.AllowTimerURLs}
	if err := q.Deliveries().SetPolicy(ctx, p); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, DeliveryPolicyJSON(p))
}
