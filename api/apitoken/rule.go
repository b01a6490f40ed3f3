package apitoken

import (
	"net/http"
	"strings"

	"github.com/timerq/timerq/api"
)

// AllNamespaces is the namespace of a route outside /v1/namespaces/{ns}
// (api.AllNamespaces): only a token with the pattern "*" matches it, since
// such a request may concern any namespace.
//
// Which right a request needs is not decided here: each route of package
// api is registered with its right and asks for it after the router
// matched (api.Options.Authorize), so that no second reading of the path
// exists to disagree with the router's.
const AllNamespaces = api.AllNamespaces

// Bearer returns the token of r's "Authorization: Bearer <token>" header.
// The scheme is case-insensitive (RFC 9110 §11.1), and the token may not
// be empty. The API server and timerctl ui's dashboard both read tokens
// with it.
func Bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}
