package api

import (
	"net/http"
	"strings"
)

// Right is what a route needs of its caller. Each route is registered
// with its right (routes), and the right is checked after the router
// matched, in the handler the route runs: the route that serves a request
// is the route whose right was checked, however its path was spelled.
type Right string

// The rights of the routes. Read, Write and Admin are the rights a token
// grants (the tokens file's rights=); the other two need no right.
const (
	// RightRead is the right of every GET and HEAD: they change nothing.
	RightRead Right = "read"
	// RightWrite is the right of the routes that change timers, schedules,
	// consumer groups and flow policies.
	RightWrite Right = "write"
	// RightAdmin is the right of creating a namespace, and of changing its
	// endpoints (where payloads go, signed with which secrets) and its
	// delivery policy (whether timers may name URLs).
	RightAdmin Right = "admin"
	// RightPublic needs no token: GET /v1/openapi.json, the contract.
	RightPublic Right = "public"
	// RightAnyToken needs a token the server knows, whatever its rights:
	// the 404 and 405 answers to a request no route matches, which tell no
	// more than the public contract does.
	RightAnyToken Right = "any-token"
)

// AllNamespaces is the namespace of a route outside /v1/namespaces/{ns}:
// such a route may concern any namespace, so its right is needed on all
// of them.
const AllNamespaces = "*"

// Need is what a request needs before its route's handler runs.
type Need struct {
	// Right is the route's right.
	Right Right
	// Namespace is the route's {ns} as the router matched it, unescaped
	// (so "a%2Fb" is the namespace "a/b", never "a"); AllNamespaces for a
	// route without {ns}; "" for RightPublic and RightAnyToken.
	Namespace string
}

// Authorizer decides whether a request may run its route's handler,
// given what the route needs. It returns false after writing the
// refusal (401, 403, 429 …), true to let the handler run.
type Authorizer func(w http.ResponseWriter, r *http.Request, need Need) bool

// Route is one route of the API and the right it needs.
type Route struct {
	// Pattern is the http.ServeMux pattern, as r.Pattern reports it.
	Pattern string
	Right   Right
}

// Routes returns every route the Handler serves with its right, in the
// order they were registered; the last is the fallback "/" (404 and 405),
// which needs RightAnyToken.
func (h *Handler) Routes() []Route { return append([]Route(nil), h.table...) }

// route registers pattern, whose handler runs only once Options.Authorize
// allowed the right on the namespace the mux matched. It is the only way
// a route is registered, so that no route runs unchecked and no second
// reading of the path decides its right.
func (h *Handler) route(pattern string, right Right, handler http.HandlerFunc) {
	scoped := strings.Contains(pattern, "{ns}")
	h.table = append(h.table, Route{Pattern: pattern, Right: right})
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		need := Need{Right: right}
		switch {
		case right == RightPublic || right == RightAnyToken:
		case scoped:
			need.Namespace = r.PathValue("ns")
		default:
			need.Namespace = AllNamespaces
		}
		if h.opts.Authorize != nil && !h.opts.Authorize(w, r, need) {
			return
		}
		handler(w, r)
	})
}
