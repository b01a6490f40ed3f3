package api

import (
	"context"
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
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (DeliveryPolicyJSON, error) {
		p, err := q.Deliveries().Policy(ctx)
		return DeliveryPolicyJSON{AllowTimerURLs: p.AllowTimerURLs}, err
	})
}

func (h *Handler) putDeliveryPolicy(w http.ResponseWriter, r *http.Request) {
	h.inNamespace(w, r, func(q *queue.Queue) error {
		var j deliveryPolicyInJSON
		if err := h.decode(w, r, &j, false); err != nil {
			return err
		}
		if j.AllowTimerURLs == nil {
			return badRequest("/allow_timer_urls", "the policy has no allow_timer_urls; give true or false")
		}
		ctx, cancel := h.ctx(r)
		defer cancel()
		p := queue.DeliveryPolicy{AllowTimerURLs: *j.AllowTimerURLs}
		if err := q.Deliveries().SetPolicy(ctx, p); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, DeliveryPolicyJSON(p))
		return nil
	})
}
