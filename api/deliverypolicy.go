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

func getDeliveryPolicy(ctx context.Context, q *queue.Queue, _ *none) (any, error) {
	p, err := q.Deliveries().Policy(ctx)
	return DeliveryPolicyJSON{AllowTimerURLs: p.AllowTimerURLs}, err
}

// deliveryPolicyRequest is the body of PUT .../delivery-policy.
type deliveryPolicyRequest struct{ p queue.DeliveryPolicy }

func (req *deliveryPolicyRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j deliveryPolicyInJSON
	if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	if j.AllowTimerURLs == nil {
		return badRequest("/allow_timer_urls", "the policy has no allow_timer_urls; give true or false")
	}
	req.p.AllowTimerURLs = *j.AllowTimerURLs
	return nil
}

func putDeliveryPolicy(ctx context.Context, q *queue.Queue, req *deliveryPolicyRequest) (any, error) {
	return DeliveryPolicyJSON(req.p), q.Deliveries().SetPolicy(ctx, req.p)
}
