package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"go.uber.org/goleak"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/consistency"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestMain stops the shared Cluster before looking for leaked goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Shared(m)) }

// contract is the OpenAPI document, loaded once, with a router that
// matches paths exactly as the handler's ServeMux does (a %2F in a timer
// ID stays inside its segment), which kin-openapi's routers do not.
type contract struct {
	doc    *openapi3.T
	mux    *http.ServeMux
	routes map[string]*routers.Route // by "METHOD /path"
}

var (
	contractOnce sync.Once
	theContract  *contract
	contractErr  error
)

func loadContract(t testing.TB) *contract {
	t.Helper()
	contractOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(api.OpenAPI())
		if err != nil {
			contractErr = fmt.Errorf("load: %w", err)
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			contractErr = fmt.Errorf("validate: %w", err)
			return
		}
		c := &contract{doc: doc, mux: http.NewServeMux(), routes: map[string]*routers.Route{}}
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				key := method + " " + path
				c.routes[key] = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
				c.mux.HandleFunc(key, func(http.ResponseWriter, *http.Request) {})
			}
		}
		theContract = c
	})
	if contractErr != nil {
		t.Fatalf("the OpenAPI document: %v", contractErr)
	}
	return theContract
}

// route finds req's operation and path parameters.
func (c *contract) route(req *http.Request) (*routers.Route, map[string]string, error) {
	probe := req.Clone(context.Background())
	probe.Body = http.NoBody
	_, pattern := c.mux.Handler(probe)
	r := c.routes[pattern]
	if r == nil {
		return nil, nil, fmt.Errorf("no operation in the document for %s %s", req.Method, req.URL.EscapedPath())
	}
	params := map[string]string{}
	segs := strings.Split(r.Path, "/")
	got := strings.Split(req.URL.EscapedPath(), "/")
	for i, seg := range segs {
		if strings.HasPrefix(seg, "{") && i < len(got) {
			v, err := url.PathUnescape(got[i])
			if err != nil {
				return nil, nil, err
			}
			params[strings.Trim(seg, "{}")] = v
		}
	}
	return r, params, nil
}

// invalidKey marks a request the test sends knowing the document refuses it.
type invalidKey struct{}

// expectInvalid returns a context under which the validating transport
// requires the request to break the document: the server must refuse
// what the contract refuses.
func expectInvalid(ctx context.Context) context.Context {
	return context.WithValue(ctx, invalidKey{}, true)
}

// validating is a RoundTripper that checks every request against the
// document before sending it, and every response after.
type validating struct {
	t    testing.TB
	c    *contract
	next http.RoundTripper
}

func (v *validating) RoundTrip(req *http.Request) (*http.Response, error) {
	v.t.Helper()
	route, params, err := v.c.route(req)
	if err != nil {
		v.t.Errorf("%v", err)
		return v.next.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	check := req.Clone(req.Context())
	check.Body = io.NopCloser(bytes.NewReader(body))
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(req.Context(), in)
	wantInvalid, _ := req.Context().Value(invalidKey{}).(bool)
	switch {
	case wantInvalid && reqErr == nil:
		v.t.Errorf("%s %s with body %.200s: the document accepts a request the test expects it to refuse", req.Method, req.URL, body)
	case !wantInvalid && reqErr != nil:
		v.t.Errorf("%s %s with body %.200s breaks the document: %v", req.Method, req.URL, body, reqErr)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	ropts := *opts
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	var rbody []byte
	if stream {
		ropts.ExcludeResponseBody = true // a stream does not end; the test checks its events
	} else {
		rbody, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(rbody))
	}
	in.Request = req
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(rbody)), Options: &ropts}
	if err := openapi3filter.ValidateResponse(req.Context(), rin); err != nil {
		v.t.Errorf("%s %s answered %d %.300s, which breaks the document: %v", req.Method, req.URL, resp.StatusCode, rbody, err)
	}
	return resp, nil
}

// env is a Handler behind an httptest.Server on one backend, with a
// client whose every request and response is checked against the document.
type env struct {
	t      *testing.T
	b      *redistest.Backend
	h      *api.Handler
	srv    *httptest.Server
	client *http.Client
	ns     string
	q      *queue.Queue // the test's own queue of ns, to set up and check
}

func newEnv(t *testing.T, b *redistest.Backend, opts api.Options) *env {
	t.Helper()
	c := loadContract(t)
	if opts.Client == nil {
		opts.Client = b.Client
	}
	h, err := api.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	ns := redistest.Namespace(t)
	if b.Shards > 1 {
		if _, err := queue.CreateNamespace(context.Background(), b.Client, ns, b.Shards); err != nil {
			t.Fatal(err)
		}
	}
	q, err := queue.New(b.Client, queue.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	tr := srv.Client().Transport.(*http.Transport).Clone()
	e := &env{t: t, b: b, h: h, srv: srv, ns: ns, q: q,
		client: &http.Client{Transport: &validating{t: t, c: c, next: tr}, Timeout: 90 * time.Second}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		h.Close()
		q.Close()
	})
	return e
}

// url is the address of path under the namespace's prefix; path's
// segments must already be escaped.
func (e *env) url(path string) string {
	return e.srv.URL + "/v1/namespaces/" + e.ns + path
}

// resp is an answer, read whole.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) problem(t testing.TB) api.Problem {
	t.Helper()
	var p api.Problem
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("answer %d %s is not a problem: %v", r.Status, r.Body, err)
	}
	return p
}

func (r resp) timer(t testing.TB) api.TimerJSON {
	t.Helper()
	var j api.TimerJSON
	if err := json.Unmarshal(r.Body, &j); err != nil {
		t.Fatalf("answer %d %s is not a timer: %v", r.Status, r.Body, err)
	}
	return j
}

// do sends a request; body is JSON-encoded unless it is a string or
// []byte, sent as it is.
func (e *env) do(ctx context.Context, method, url string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{Status: res.StatusCode, Header: res.Header, Body: data}
}

// doRaw sends body as it is, with Content-Type ct.
func (e *env) doRaw(ctx context.Context, method, url, ct, body string) resp {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{Status: res.StatusCode, Header: res.Header, Body: data}
}

// snapshot is the namespace's whole contents, to show that a refused
// request wrote nothing.
func (e *env) snapshot() string {
	e.t.Helper()
	s, err := consistency.Snapshot(context.Background(), e.b.Client, e.q)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}
