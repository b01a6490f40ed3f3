// Package api serves timerq over HTTP, so that a program in any language can
// schedule, inspect, wait for and consume timers. Its Handler is a thin
// adapter over package queue: it knows no key names and keeps no state
// between requests, so any number of replicas may serve one Redis.
//
// The contract is the OpenAPI document served at /v1/openapi.json;
// docs/api.md explains it.
//
// # Mounting
//
// Mount the Handler at the root of a mux (every route starts with /v1/):
//
//	h, err := api.New(api.Options{Client: rdb})
//	…
//	mux.Handle("/v1/", authenticate(h))
//
// # Rights
//
// The Handler does not authenticate. Its routes follow one rule, so that a
// middleware can authorize by method and path alone: everything about a
// namespace is under /v1/namespaces/{ns}; GET and HEAD change nothing and
// need "read"; every other method needs "write"; PUT and DELETE on
// /v1/namespaces/{ns} itself, and changes under
// /v1/namespaces/{ns}/endpoints (where fires are delivered, with which
// secrets), need "admin". GET /v1/openapi.json is public.
//
// ServeHTTP hands the request itself, not a copy, to its ServeMux, so the
// middleware finds the matched route in r.Pattern after ServeHTTP returns;
// and every queue call runs under r.Context(), so a trace the middleware
// extracted from traceparent continues into the timerq.schedule span.
//
// # Errors
//
// Every error is a Problem (RFC 9457) whose Type is ProblemTypePrefix plus
// one of the Slug constants, and whose Detail says what to do. A request
// that fails writes nothing.
package api
