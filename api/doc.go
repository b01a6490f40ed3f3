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
//	h, err := api.New(api.Options{Client: rdb, Authorize: authorize})
//	…
//	mux.Handle("/v1/", h)
//
// # Rights
//
// The Handler does not authenticate. Each route is registered with the
// right it needs (Right: read, write, admin, or public for the contract),
// and once the router has matched a request, the route asks
// Options.Authorize for that right on the namespace the router read
// ({ns}, unescaped) before its handler runs. So the route that runs is
// always the route whose right was checked, however the path was spelled:
// a middleware in front of the Handler cannot say as much, since it would
// read the path apart from the router. Handler.Routes lists the routes
// and their rights.
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
