package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/worker"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/uitest"
	"github.com/timerq/timerq/queue"
)

// wantRights is the right each operation of the API needs, as docs/api.md
// ("Rights") and docs/security.md promise it. It is written here, apart
// from the routes' own table in package api, so that a route registered
// with a weaker right than promised fails the test.
var wantRights = map[string]string{
	"GET /v1/openapi.json": "public",

	"PUT /v1/namespaces/{ns}": "admin",
	"GET /v1/namespaces/{ns}": "read",

	"POST /v1/namespaces/{ns}/timers":                 "write",
	"GET /v1/namespaces/{ns}/timers":                  "read",
	"POST /v1/namespaces/{ns}/timers/batch":           "write",
	"POST /v1/namespaces/{ns}/timers/cancel":          "write",
	"GET /v1/namespaces/{ns}/cancel-jobs":             "read",
	"GET /v1/namespaces/{ns}/cancel-jobs/{id}":        "read",
	"GET /v1/namespaces/{ns}/timers/{id}":             "read",
	"POST /v1/namespaces/{ns}/timers/{id}/cancel":     "write",
	"POST /v1/namespaces/{ns}/timers/{id}/reschedule": "write",
	"POST /v1/namespaces/{ns}/timers/{id}/fire":       "write",
	"GET /v1/namespaces/{ns}/timers/{id}/wait":        "read",
	"POST /v1/namespaces/{ns}/debounce/{key}":         "write",
	"GET /v1/namespaces/{ns}/owners/{owner}":          "read",
	"POST /v1/namespaces/{ns}/owners/{owner}/epoch":   "write",
	"GET /v1/namespaces/{ns}/fires":                   "read",

	"POST /v1/namespaces/{ns}/schedules":                                    "write",
	"GET /v1/namespaces/{ns}/schedules":                                     "read",
	"GET /v1/namespaces/{ns}/schedules/{id}":                                "read",
	"PUT /v1/namespaces/{ns}/schedules/{id}":                                "write",
	"DELETE /v1/namespaces/{ns}/schedules/{id}":                             "write",
	"POST /v1/namespaces/{ns}/schedules/{id}/pause":                         "write",
	"POST /v1/namespaces/{ns}/schedules/{id}/resume":                        "write",
	"POST /v1/namespaces/{ns}/groups/{group}/lease":                         "write",
	"POST /v1/namespaces/{ns}/groups/{group}/ack":                           "write",
	"GET /v1/namespaces/{ns}/groups/{group}/flows":                          "read",
	"GET /v1/namespaces/{ns}/groups/{group}/dead-letters":                   "read",
	"POST /v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/release": "write",
	"POST /v1/namespaces/{ns}/groups/{group}/deliveries/{delivery}/extend":  "write",
	"POST /v1/namespaces/{ns}/groups/{group}/dead-letters/{dead}/requeue":   "write",

	// Where payloads go, signed with which secrets, and whether timers may
	// name URLs: the admin's.
	"GET /v1/namespaces/{ns}/endpoints":                 "read",
	"GET /v1/namespaces/{ns}/endpoints/{name}":          "read",
	"PUT /v1/namespaces/{ns}/endpoints/{name}":          "admin",
	"DELETE /v1/namespaces/{ns}/endpoints/{name}":       "admin",
	"POST /v1/namespaces/{ns}/endpoints/{name}/enable":  "admin",
	"POST /v1/namespaces/{ns}/endpoints/{name}/disable": "admin",
	"GET /v1/namespaces/{ns}/delivery-policy":           "read",
	"PUT /v1/namespaces/{ns}/delivery-policy":           "admin",
	"GET /v1/namespaces/{ns}/quotas":                    "read",
	"PUT /v1/namespaces/{ns}/quotas":                    "admin",
	"GET /v1/namespaces/{ns}/flow-policies":             "read",
	"PUT /v1/namespaces/{ns}/flow-policies":             "write",
	"DELETE /v1/namespaces/{ns}/flow-policies":          "write",
}

// The bodies of the operations whose effect, were it let through, the
// test must see: each would write if its handler ran.
const (
	endpointBody = `{"url":"https://hooks.example.com/h","secrets":["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}`
	policyBody   = `{"allow_timer_urls":true}`
)

var opBodies = map[string]string{
	"PUT /v1/namespaces/{ns}":                  `{"shards":1}`,
	"POST /v1/namespaces/{ns}/timers":          `{"id":"new","in":"1h"}`,
	"POST /v1/namespaces/{ns}/timers/cancel":   `{"id_prefix":"new"}`,
	"PUT /v1/namespaces/{ns}/endpoints/{name}": endpointBody,
	"PUT /v1/namespaces/{ns}/delivery-policy":  policyBody,
	"PUT /v1/namespaces/{ns}/quotas":           `{"pending":5}`,
}

// tokenKind is one kind of caller: the rights its token has on the test's
// namespace (or another one); spec "" is no token, and revoked a token the
// server does not know.
type tokenKind struct {
	name    string
	spec    string // namespaces=… rights=…, with NS for the test's namespace
	revoked bool
}

var tokenKinds = []tokenKind{
	{name: "none"},
	{name: "revoked", revoked: true},
	{name: "read", spec: "namespaces=NS rights=read"},
	{name: "write", spec: "namespaces=NS rights=read,write"},
	{name: "write-only", spec: "namespaces=NS rights=write"},
	{name: "admin", spec: "namespaces=NS rights=read,write,admin"},
	{name: "admin-only", spec: "namespaces=NS rights=admin"},
	{name: "other-ns", spec: "namespaces=OTHER rights=read,write,admin"},
}

// allows reports whether a caller of kind k may use right on ns, by the
// tokens file's rules.
func (k tokenKind) allows(right, ns, testNS string) bool {
	if right == "public" {
		return true
	}
	if k.spec == "" || k.revoked {
		return false
	}
	f := strings.Fields(k.spec)
	pattern := strings.TrimPrefix(f[0], "namespaces=")
	rights := strings.Split(strings.TrimPrefix(f[1], "rights="), ",")
	return pattern == "NS" && ns == testNS && slices.Contains(rights, right)
}

// operation is one operation of api/openapi.json.
type operation struct {
	method, template string
}

func (o operation) key() string { return o.method + " " + o.template }

// operations parses the API's OpenAPI document: every operation of every
// path.
func operations(t *testing.T) []operation {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	var ops []operation
	for p, item := range doc.Paths {
		for m := range item {
			switch m {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops = append(ops, operation{strings.ToUpper(m), p})
			}
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].key() < ops[j].key() })
	return ops
}

// path fills o's template with the test's values.
func (o operation) path(ns string) string {
	r := strings.NewReplacer("{ns}", ns, "{id}", "t1", "{key}", "k1", "{group}", "g1",
		"{delivery}", "0-1700000000000-0", "{dead}", "0-1700000000000-1", "{name}", "e1", "{owner}", "o1")
	return r.Replace(o.template)
}

// probe is the test's own router of the document's operations: it tells
// which operation a path reaches, and with which {ns}, as http.ServeMux
// reads it. "" is none (a 404 or 405, or a redirect to the clean path).
type probe struct{ mux *http.ServeMux }

func newProbe(ops []operation) *probe {
	p := &probe{mux: http.NewServeMux()}
	for _, o := range ops {
		p.mux.HandleFunc(o.key(), func(w http.ResponseWriter, r *http.Request) {
			ns := apitoken.AllNamespaces
			if strings.Contains(o.template, "{ns}") {
				ns = r.PathValue("ns")
			}
			w.Header().Set("X-Op", o.key())
			w.Header().Set("X-NS", ns)
		})
	}
	return p
}

func (p *probe) route(method, rawPath string) (op, ns string) {
	u, err := url.ParseRequestURI(rawPath)
	if err != nil {
		return "", ""
	}
	rec := httptest.NewRecorder()
	p.mux.ServeHTTP(rec, &http.Request{Method: method, URL: u, Host: "127.0.0.1", Header: http.Header{}, RequestURI: rawPath})
	return rec.Header().Get("X-Op"), rec.Header().Get("X-NS")
}

// rightsRig is an apiserver with a tokens file of every kind in front of
// package api on one Redis.
type rightsRig struct {
	t      *testing.T
	ns     string
	rdb    redis.UniversalClient
	q      *queue.Queue
	srv    *server
	h      *api.Handler
	tokens map[string]string // by kind
	seen   sync.Map          // X-Request: the operation the API's mux matched
}

func newRightsRig(t *testing.T, b *redistest.Backend) *rightsRig {
	ns := redistest.Namespace(t)
	other := ns + "-other"
	var specs []string
	for _, k := range tokenKinds {
		if k.spec != "" {
			specs = append(specs, k.name+" "+strings.NewReplacer("NS", ns, "OTHER", other).Replace(k.spec)+" rps=0")
		}
	}
	file, tok := tokens(t, specs...)
	revoked, _, err := apitoken.Mint("revoked", []string{"*"}, []apitoken.Right{apitoken.Read, apitoken.Write, apitoken.Admin})
	if err != nil {
		t.Fatal(err)
	}
	tok["revoked"] = revoked
	// The handler timerworker serves, wired as it wires it.
	hh, err := worker.NewAPIHandler(worker.APIEnv{Redis: b.Client, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := hh.(*api.Handler)
	t.Cleanup(func() { h.Close() })
	g := &rightsRig{t: t, ns: ns, rdb: b.Client, tokens: tok, h: h}
	// Between the server and the API: which route the API's own mux
	// matched (ServeHTTP hands it the request itself).
	spy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		g.seen.Store(r.Header.Get("X-Request"), r.Pattern)
	})
	g.srv = start(t, apiserver.Config{TokensFile: file}, spy)
	ctx := context.Background()
	if _, err := queue.CreateNamespace(ctx, b.Client, ns, 1); err != nil {
		t.Fatal(err)
	}
	g.q, err = queue.New(b.Client, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.q.Close() })
	g.restore()
	return g
}

// restore puts back what the refused requests must leave alone: a pending
// timer t1, an enabled endpoint e1 with a known secret, and the default
// delivery policy.
func (g *rightsRig) restore() {
	g.t.Helper()
	ctx := context.Background()
	if _, err := g.q.Schedule(ctx, "t1", time.Now().Add(time.Hour), []byte("p")); err != nil {
		g.t.Fatal(err)
	}
	e := queue.Endpoint{Name: "e1", URL: "https://victim.example.com/h", Secrets: []queue.Secret{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	if _, err := g.q.Endpoints().Put(ctx, e, nil); err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.q.Endpoints().SetEnabled(ctx, "e1", true); err != nil {
		g.t.Fatal(err)
	}
	if err := g.q.Deliveries().SetPolicy(ctx, queue.DeliveryPolicy{}); err != nil {
		g.t.Fatal(err)
	}
}

// digest is every key of the namespace with its value (redistest.Digest).
func (g *rightsRig) digest() string { return redistest.Digest(g.t, g.rdb, g.ns) }

// result is one request's outcome.
type result struct {
	status  int
	problem api.Problem
	reached string // the pattern the API's mux matched; "" if it never ran
}

var requestSeq struct {
	sync.Mutex
	n int
}

// send sends method rawPath (sent as is, never cleaned nor re-encoded) with
// kind's token.
func (g *rightsRig) send(method, rawPath, kind, body string) result {
	g.t.Helper()
	requestSeq.Lock()
	requestSeq.n++
	id := fmt.Sprint(requestSeq.n)
	requestSeq.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.srv.URL()+"/", strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.URL.Opaque = rawPath
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request", id)
	if tok := g.tokens[kind]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	client := &http.Client{Transport: g.srv.client.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, rawPath, err)
	}
	defer resp.Body.Close()
	res := result{status: resp.StatusCode}
	if resp.Header.Get("Content-Type") == api.ProblemContentType {
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &res.problem)
	}
	// A stream's answer comes once its headers are out; closing the body
	// ends it. Wait for the spy only for a handler that returned.
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	if v, ok := g.seen.Load(id); ok {
		res.reached = v.(string)
	}
	return res
}

// refusedBy reports whether res is the server's refusal, 401 or 403.
func (res result) refusedBy() bool {
	return res.status == 401 && res.problem.Type == apiserver.ProblemUnauthorized ||
		res.status == 403 && res.problem.Type == apiserver.ProblemForbidden
}

// reachedHandler reports whether the API's handler for a route ran (not
// only the mux's 404, 405 or redirect to the clean path, which reports the
// clean path's pattern): what a refused caller must never get to.
func (res result) reachedHandler() bool {
	return res.reached != "" && res.reached != "/" && !res.refusedBy() && res.status/100 != 3
}

// check judges one request of a caller of kind k: allowed, it must not be
// refused; refused, it must get 401 (no or unknown token) or 403 (naming the
// right and namespace) and write nothing; matching no route, it must not
// reach a handler.
func (g *rightsRig) check(pr *probe, method, rawPath string, k tokenKind, body string) (res result, allowed bool) {
	g.t.Helper()
	op, ns := pr.route(method, rawPath)
	right := wantRights[op]
	allowed = op != "" && k.allows(right, ns, g.ns)
	res = g.send(method, rawPath, k.name, body)
	where := fmt.Sprintf("%s %s with a %s token", method, rawPath, k.name)
	switch {
	case allowed:
		if res.refusedBy() {
			g.t.Errorf("%s (%s, right %s on %q): refused %d %s, want it allowed", where, op, right, ns, res.status, res.problem.Detail)
		}
		if res.reached != "" && res.reached != op {
			g.t.Errorf("%s: the API ran %s, the router of the document %s", where, res.reached, op)
		}
	case op != "":
		want := 403
		if k.spec == "" || k.revoked {
			want = 401
		}
		if res.status != want || !res.refusedBy() {
			g.t.Errorf("%s (%s needs %s on %q): %d %s (handler %q), want %d", where, op, right, ns, res.status, res.problem.Type, res.reached, want)
		} else if want == 403 && (res.problem.Right != right || res.problem.Namespace != ns) {
			g.t.Errorf("%s: 403 names right %q on %q, want %s on %q", where, res.problem.Right, res.problem.Namespace, right, ns)
		}
	default:
		if res.status/100 == 2 || res.reachedHandler() {
			g.t.Errorf("%s matches no operation, yet got %d from handler %q", where, res.status, res.reached)
		}
		if (k.spec == "" || k.revoked) && res.status/100 != 3 && res.status != 401 {
			g.t.Errorf("%s matches no operation: %d, want 401 (or a redirect to the clean path)", where, res.status)
		}
	}
	return res, allowed
}

// TestRightsOfEveryOperation walks every operation of api/openapi.json with
// every kind of token, on its own path and on the path spelled otherwise
// (percent-encoded letters, case, ";", "//", "/./", "/../", "%2F"), through
// the real server in front of the real API. Each request must get what its
// token's rights allow on the operation the router reaches: a refused one
// gets 401 or 403 and writes nothing, an allowed one is not refused, and
// one that reaches no operation reaches no handler.
func TestRightsOfEveryOperation(t *testing.T) {
	t.Parallel() // about 30,000 requests: over 8 s under -race (docs/development.md)
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		g := newRightsRig(t, b)
		ops := operations(t)
		pr := newProbe(ops)
		for _, o := range ops {
			if _, ok := wantRights[o.key()]; !ok {
				t.Errorf("%s is in api/openapi.json but not in wantRights: say which right it needs", o.key())
			}
		}
		for k := range wantRights {
			if !slices.ContainsFunc(ops, func(o operation) bool { return o.key() == k }) {
				t.Errorf("wantRights has %s, which api/openapi.json does not", k)
			}
		}
		// The routes the API's mux serves, with the rights they ask for:
		// the same set as the document's, each with its promised right;
		// and the fallback, which needs any known token.
		routes := g.h.Routes()
		served := map[string]bool{}
		for _, rt := range routes {
			served[rt.Pattern] = true
			want, ok := wantRights[rt.Pattern]
			switch {
			case rt.Pattern == "/":
				if rt.Right != api.RightAnyToken {
					t.Errorf("the fallback / asks for %q, want %q", rt.Right, api.RightAnyToken)
				}
			case !ok:
				t.Errorf("the API serves %s, which neither api/openapi.json nor wantRights lists", rt.Pattern)
			case string(rt.Right) != want:
				t.Errorf("%s asks for the right %q, want %q", rt.Pattern, rt.Right, want)
			}
		}
		if !served["/"] || routes[len(routes)-1].Pattern != "/" {
			t.Errorf("the fallback / is not the last route: %v", routes)
		}
		for _, o := range ops {
			if !served[o.key()] {
				t.Errorf("%s is in api/openapi.json but the API does not serve it", o.key())
			}
		}
		summary := map[string][]string{}
		refused, allowedN := 0, 0
		for _, o := range ops {
			raw := o.path(g.ns)
			if o.template == "/v1/namespaces/{ns}/timers/{id}/wait" {
				raw += "?timeout=1ms"
			}
			paths := append([]string{raw}, uitest.Spellings(o.path(g.ns))...)
			if strings.Contains(raw, "?") {
				for i := 1; i < len(paths); i++ {
					paths[i] += "?timeout=1ms"
				}
			}
			body := opBodies[o.key()]
			if body == "" && o.method != "GET" {
				body = "{}"
			}
			for _, k := range tokenKinds {
				// The refused requests first, all of them between two
				// digests: none may write. Then the allowed ones, after
				// which the fixtures are put back.
				var allowedPaths []string
				before := g.digest()
				for _, p := range paths {
					op, ns := pr.route(o.method, p)
					if op != "" && k.allows(wantRights[op], ns, g.ns) {
						allowedPaths = append(allowedPaths, p)
						continue
					}
					res, _ := g.check(pr, o.method, p, k, body)
					refused++
					if p == raw {
						summary[o.key()] = append(summary[o.key()], fmt.Sprintf("%s:%d", k.name, res.status))
					}
				}
				if after := g.digest(); after != before {
					t.Errorf("%s by a %s token, on its path or a variant, wrote to Redis though refused:\nbefore:\n%s\nafter:\n%s", o.key(), k.name, before, after)
					g.restore()
				}
				for _, p := range allowedPaths {
					res, _ := g.check(pr, o.method, p, k, body)
					allowedN++
					if p == raw {
						summary[o.key()] = append(summary[o.key()], fmt.Sprintf("%s:%d", k.name, res.status))
					}
				}
				if len(allowedPaths) > 0 && o.method != "GET" {
					g.restore()
				}
			}
		}
		t.Logf("%d refused and %d allowed requests", refused, allowedN)
		for _, o := range ops {
			t.Logf("%-70s %-6s %s", o.key(), wantRights[o.key()], strings.Join(summary[o.key()], " "))
		}
	})
}

// TestIssue35AdminBypass: the requests of the security trial, a write
// token percent-encoding one letter of an admin route, get 403 and change
// nothing.
func TestIssue35AdminBypass(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		g := newRightsRig(t, b)
		A := "/v1/namespaces/" + g.ns
		for _, kind := range []string{"write", "write-only"} {
			for _, tc := range []struct{ method, path, body string }{
				{"PUT", A + "/%65ndpoints/e1", endpointBody},
				{"PUT", A + "/%65ndpoints/e2", endpointBody},
				{"DELETE", A + "/%65ndpoints/e1", ""},
				{"POST", A + "/end%70oints/e1/disable", ""},
				{"PUT", A + "/%64elivery-policy", policyBody},
			} {
				before := g.digest()
				res := g.send(tc.method, tc.path, kind, tc.body)
				if res.status != 403 || res.problem.Type != apiserver.ProblemForbidden || res.problem.Right != "admin" {
					t.Errorf("%s %s with a %s token: %d %+v, want 403 for want of admin", tc.method, tc.path, kind, res.status, res.problem)
				}
				if g.digest() != before {
					t.Errorf("%s %s with a %s token wrote to Redis", tc.method, tc.path, kind)
					g.restore()
				}
			}
		}
		e, err := g.q.Endpoints().Get(context.Background(), "e1")
		if err != nil || e.URL != "https://victim.example.com/h" || e.Disabled {
			t.Errorf("endpoint e1 after the bypass attempts: %+v, %v; want it as it was", e, err)
		}
		if _, err := g.q.Endpoints().Get(context.Background(), "e2"); err == nil {
			t.Error("endpoint e2 was created by a write token")
		}
		if p, err := g.q.Deliveries().Policy(context.Background()); err != nil || p.AllowTimerURLs {
			t.Errorf("delivery policy after the bypass attempts: %+v, %v; want the default", p, err)
		}
	})
}
