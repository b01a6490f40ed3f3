package apitoken

import (
	"net/http"
	"net/url"
	"path"
	"strings"
)

// AllNamespaces is the namespace a request names when it names none (a
// path outside /v1/namespaces/{ns}): only a token with the pattern "*"
// matches it, since such a request may concern any namespace.
const AllNamespaces = "*"

// OpenAPIPath is the one path served without a token (to GET and HEAD):
// the API's contract is no secret, and clients fetch it to generate code.
const OpenAPIPath = "/v1/openapi.json"

// Need is what a request needs: a Right on a namespace, unless Public.
type Need struct {
	Public    bool
	Right     Right
	Namespace string
}

// Required returns what r needs, by the rule the API's routes follow:
// everything that concerns one namespace is under /v1/namespaces/{ns};
// GET and HEAD need read, other methods write; PUT and DELETE of
// /v1/namespaces/{ns} itself, and every method but GET and HEAD under
// /v1/namespaces/{ns}/endpoints, /v1/namespaces/{ns}/delivery-policy and
// /v1/namespaces/{ns}/quotas, need admin; GET of OpenAPIPath is public. A
// request elsewhere needs its right on AllNamespaces.
//
// The namespace is read from r's escaped path, one segment unescaped, as
// http.ServeMux matches {ns}, so "a%2Fb" is the namespace "a/b" (which no
// pattern matches) and never "a". A path that is not clean ("/./", "..",
// "//") is treated as naming no namespace, since the router would resolve
// it to another one.
func Required(r *http.Request) Need {
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	p := r.URL.Path
	if read && p == OpenAPIPath {
		return Need{Public: true}
	}
	right := Write
	if read {
		right = Read
	}
	unscoped := Need{Right: right, Namespace: AllNamespaces}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean != p {
		return unscoped
	}
	seg := strings.Split(r.URL.EscapedPath(), "/")
	if len(seg) < 4 || seg[0] != "" || seg[1] != "v1" || seg[2] != "namespaces" || seg[3] == "" {
		return unscoped
	}
	ns, err := url.PathUnescape(seg[3])
	if err != nil {
		return unscoped
	}
	itself := len(seg) == 4 || len(seg) == 5 && seg[4] == ""
	if itself && (r.Method == http.MethodPut || r.Method == http.MethodDelete) {
		right = Admin
	}
	// An endpoint decides where every delivering timer's payload goes and
	// holds the secrets that sign it: changing one is the admin's.
	if !read && len(seg) >= 5 && seg[4] == "endpoints" {
		right = Admin
	}
	// So does the delivery policy, which may let timers name URLs.
	if !read && len(seg) >= 5 && seg[4] == "delivery-policy" {
		right = Admin
	}
	// And the quotas, which bound what every writer may add.
	if !read && len(seg) >= 5 && seg[4] == "quotas" {
		right = Admin
	}
	return Need{Right: right, Namespace: ns}
}
