package deliver_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/timerq/timerq/deliver"
)

func TestSendHeadersAndSignature(t *testing.T) {
	s := newSink(t, nil)
	sec, _ := deliver.ParseSecret(deliver.GenerateSecret())
	now := time.Date(2026, 12, 4, 21, 0, 5, 0, time.UTC)
	snd := &deliver.Sender{Guard: &deliver.Guard{Allow: loopback}, Now: func() time.Time { return now }}
	t.Cleanup(snd.CloseIdleConnections)
	f := deliver.Fire{Namespace: "ns", TimerID: "order/42 é", Due: now.Add(-5 * time.Second), FiredAt: now.Add(-4990 * time.Millisecond),
		Payload: []byte(`{"order":42}`), Attempt: 3, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Owner: "wf/7 é", Epoch: 12}
	ep := deliver.Endpoint{Name: "billing", URL: s.URL + "/hooks?x=1", Headers: map[string]string{"Authorization": "Bearer t0k"}, Secrets: []deliver.Secret{sec}}
	a := snd.Send(context.Background(), ep, f)
	if a.Outcome != deliver.Delivered {
		t.Fatalf("%+v", a)
	}
	r, body := s.reqs[0], string(s.body[0])
	id := deliver.MessageID("ns", "order/42 é", f.Due)
	for k, want := range map[string]string{
		"webhook-id":        id,
		"webhook-timestamp": strconv.FormatInt(now.Unix(), 10),
		"webhook-signature": deliver.Sign(id, now, f.Payload, sec),
		"timerq-timer-id":   url.PathEscape("order/42 é"),
		"timerq-due-at":     "2026-12-04T21:00:00.000Z",
		"timerq-fired-at":   "2026-12-04T21:00:00.010Z",
		"timerq-attempt":    "3",
		"traceparent":       f.TraceParent,
		"timerq-owner":      url.PathEscape("wf/7 é"),
		"timerq-epoch":      "12",
		"Authorization":     "Bearer t0k",
		"Content-Type":      "application/json",
		"User-Agent":        "timerq-deliver/1",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if r.Method != http.MethodPost || r.URL.RequestURI() != "/hooks?x=1" || body != `{"order":42}` {
		t.Errorf("request %s %s %q", r.Method, r.URL.RequestURI(), body)
	}

	// A non-JSON payload is sent as octet-stream, a configured
	// Content-Type wins, no secret means no signature, and a timer
	// without an owner has neither owner nor epoch.
	s2 := newSink(t, nil)
	f.Payload, f.Owner = []byte{0xff, 0x00}, ""
	snd.Send(context.Background(), deliver.Endpoint{URL: s2.URL}, f)
	ep.URL, ep.Headers = s2.URL, map[string]string{"Content-Type": "text/plain"}
	snd.Send(context.Background(), ep, f)
	if got := s2.reqs[0].Header.Get("Content-Type"); got != "application/octet-stream" {
		t.Errorf("binary payload Content-Type %q", got)
	}
	// The server canonicalises the sender's lower-case names, which
	// Values (unlike indexing the map) looks up.
	if sig := s2.reqs[0].Header.Values(deliver.HeaderSignature); len(sig) > 0 {
		t.Errorf("a request without secrets is signed: %q", sig)
	}
	for _, k := range []string{deliver.HeaderOwner, deliver.HeaderEpoch} {
		if v := s2.reqs[0].Header.Values(k); len(v) > 0 {
			t.Errorf("a fire without an owner sends %s %q", k, v)
		}
	}
	if got := s2.reqs[1].Header.Get("Content-Type"); got != "text/plain" {
		t.Errorf("configured Content-Type lost: %q", got)
	}
}

// The webhook-id is the same on every attempt of one fire, and on every
// Sender; the timestamp and signature are the attempt's own.
func TestSendWebhookIDStableAcrossAttempts(t *testing.T) {
	s := newSink(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	sec, _ := deliver.ParseSecret(deliver.GenerateSecret())
	f := fire("t1")
	ep := deliver.Endpoint{URL: s.URL, Secrets: []deliver.Secret{sec}}
	clock := time.Now()
	for i := 1; i <= 3; i++ {
		f.Attempt = i
		clock = clock.Add(2 * time.Second)
		snd := &deliver.Sender{Guard: &deliver.Guard{Allow: loopback}, Now: func() time.Time { return clock }}
		if a := snd.Send(context.Background(), ep, f); a.Outcome != deliver.Retry || a.Status != 500 {
			t.Fatalf("attempt %d: %+v", i, a)
		}
		snd.CloseIdleConnections()
	}
	ids, stamps := map[string]bool{}, map[string]bool{}
	for _, r := range s.reqs {
		ids[r.Header.Get("webhook-id")] = true
		stamps[r.Header.Get("webhook-timestamp")] = true
	}
	if len(ids) != 1 || len(stamps) != 3 {
		t.Fatalf("3 attempts had %d webhook-ids and %d timestamps; want 1 and 3", len(ids), len(stamps))
	}
}

// An answer's body is read only up to MaxBody, however long it is, and the
// error excerpt is bounded. The endpoint offers 64 MiB, more than the
// loopback socket buffers hold, so its writes fail once the Sender stops
// reading and closes the connection.
func TestSendBodyCap(t *testing.T) {
	const offered = 64 << 20
	written := make(chan int, 1)
	s := newSink(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		chunk := []byte(strings.Repeat("é", 16<<10))
		n := 0
		for n < offered {
			m, err := w.Write(chunk)
			n += m
			if err != nil {
				break // the client stopped reading
			}
		}
		written <- n
	})
	snd := &deliver.Sender{Guard: &deliver.Guard{Allow: loopback}, MaxBody: 1000}
	t.Cleanup(snd.CloseIdleConnections)
	a := snd.Send(context.Background(), deliver.Endpoint{URL: s.URL}, fire("t1"))
	if a.Status != 500 || a.BodyBytes != 1000 || !a.Truncated {
		t.Fatalf("%+v: want status 500, 1000 body bytes read, truncated", a)
	}
	if len(a.Error) > deliver.MaxErrorExcerpt || !utf8.ValidString(a.Error) || !strings.HasPrefix(a.Error, "éé") || !strings.HasSuffix(a.Error, "…") {
		t.Fatalf("error excerpt (%d bytes) %q", len(a.Error), a.Error)
	}
	if n := <-written; n >= offered {
		t.Fatalf("the endpoint wrote all %d bytes: the body was read whole", n)
	}

	small := newSink(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	if a := snd.Send(context.Background(), deliver.Endpoint{URL: small.URL}, fire("t1")); a.BodyBytes != 2 || a.Truncated || a.Error != "" {
		t.Fatalf("short 200: %+v", a)
	}
}

func TestSendTimeoutAndConnectionError(t *testing.T) {
	release := make(chan struct{})
	s := newSink(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	snd := newSender(t, &deliver.Guard{Allow: loopback})
	a := snd.Send(context.Background(), deliver.Endpoint{URL: s.URL, Timeout: 100 * time.Millisecond}, fire("t1"))
	if a.Outcome != deliver.Retry || a.Reason != deliver.ReasonTimeout || a.Latency < 100*time.Millisecond {
		t.Fatalf("slow endpoint: %+v, want a retry for timeout after 100ms", a)
	}

	// A port nobody listens on: the sink's own, once closed.
	gone := newSink(t, nil)
	gone.Close()
	a = snd.Send(context.Background(), deliver.Endpoint{URL: gone.URL}, fire("t1"))
	if a.Outcome != deliver.Retry || a.Reason != deliver.ReasonConnection || a.Error == "" {
		t.Fatalf("closed port: %+v, want a retry for connection", a)
	}
}

func TestEndpointValidate(t *testing.T) {
	ok := deliver.Endpoint{Name: "e", URL: "https://example.com/h", Headers: map[string]string{"Authorization": "x", "X-Tenant": "7"}}
	if err := ok.Validate(nil); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*deliver.Endpoint){
		"bad url":          func(e *deliver.Endpoint) { e.URL = "ftp://x" },
		"private url":      func(e *deliver.Endpoint) { e.URL = "http://192.168.0.1/" },
		"negative timeout": func(e *deliver.Endpoint) { e.Timeout = -1 },
		"long timeout":     func(e *deliver.Endpoint) { e.Timeout = time.Hour },
		"negative flight":  func(e *deliver.Endpoint) { e.MaxInFlight = -1 },
		"bad policy":       func(e *deliver.Endpoint) { e.Policy.MaxAttempts = -1 },
		"webhook header":   func(e *deliver.Endpoint) { e.Headers = map[string]string{"Webhook-Signature": "v1,x"} },
		"timerq header":    func(e *deliver.Endpoint) { e.Headers = map[string]string{"timerq-attempt": "1"} },
		"host header":      func(e *deliver.Endpoint) { e.Headers = map[string]string{"host": "evil"} },
		"traceparent":      func(e *deliver.Endpoint) { e.Headers = map[string]string{"Traceparent": "x"} },
		"bad name":         func(e *deliver.Endpoint) { e.Headers = map[string]string{"X Y": "1"} },
		"crlf value":       func(e *deliver.Endpoint) { e.Headers = map[string]string{"X-Y": "1\r\nHost: evil"} },
	} {
		e := ok
		mut(&e)
		err := e.Validate(nil)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, deliver.ErrInvalidEndpoint) && !errors.Is(err, deliver.ErrInvalidURL) &&
			!errors.Is(err, deliver.ErrRefused) && !errors.Is(err, deliver.ErrInvalidPolicy) {
			t.Errorf("%s: %v wraps no sentinel", name, err)
		}
	}
}

// A URL that can never be delivered to (another scheme, userinfo) is a
// dead letter at once, not a connection error to retry.
func TestSendBadURLIsADeadLetter(t *testing.T) {
	snd := newSender(t, &deliver.Guard{Allow: loopback})
	for _, u := range []string{"ftp://127.0.0.1/x", "http://user:pw@127.0.0.1/", "not a url"} {
		a := snd.Send(context.Background(), deliver.Endpoint{URL: u}, fire("t1"))
		if a.Outcome != deliver.DeadLetter || a.Reason != deliver.ReasonRefused || a.Status != 0 {
			t.Errorf("%q: %+v, want a dead letter", u, a)
		}
	}
}
