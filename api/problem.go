package api

import (
	"encoding/json"
	"net/http"
)

// ProblemContentType is the media type of every error the API returns
// (RFC 9457).
const ProblemContentType = "application/problem+json"

// ProblemTypePrefix starts every Problem.Type the API writes. The types are
// URNs rather than web addresses: they are stable names for clients to
// switch on, and nothing needs to be served at them.
const ProblemTypePrefix = "urn:timerq:problem:"

// Problem is an RFC 9457 problem details object: the body of every error
// response. Type is ProblemTypePrefix plus a slug that names the cause
// ("not-found", "forbidden", …) and never changes; Detail says what went
// wrong and what to do, as the CLI's errors do.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Right and Namespace name what a 403 lacked: the right ("read",
	// "write", "admin") on the namespace.
	Right     string `json:"right,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Field names the request field a 400 or 422 refused, as a JSON
	// pointer ("/timers/3/due_at").
	Field string `json:"field,omitempty"`
	// Quota names the namespace's quota that refused a request (403
	// quota-exceeded): "pending", "endpoints" or "schedules".
	Quota string `json:"quota,omitempty"`
}

// WriteProblem writes p as the response, with p.Status as the status code.
// Headers such as Retry-After must be set before the call.
func WriteProblem(w http.ResponseWriter, p Problem) {
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
