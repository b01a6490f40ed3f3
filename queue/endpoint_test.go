package queue_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// testSecret is a valid signing secret whose key is n bytes of b.
func testSecret(b byte, n int) queue.Secret {
	return queue.Secret(queue.SecretPrefix + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(b), n))))
}

func billing() queue.Endpoint {
	return queue.Endpoint{
		Name:        "billing",
		URL:         "https://billing.example.com/hooks/timerq",
		Headers:     map[string]string{"Authorization": "Bearer t0ken"},
		Timeout:     5 * time.Second,
		Retry:       queue.RetryPolicy{MaxAttempts: 7, MaxAge: time.Hour, Base: 500 * time.Millisecond, Cap: time.Minute},
		MaxInFlight: 8,
		Secrets:     []queue.Secret{testSecret('a', 32), testSecret('b', 24)},
	}
}

func TestEndpointPutGetListDelete(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		e := billing()
		created, err := q.Endpoints().Put(ctx, e, nil)
		if err != nil || !created {
			t.Fatalf("PutEndpoint = %v, %v; want created", created, err)
		}
		got, err := q.Endpoints().Get(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		if got.UpdatedAt.IsZero() {
			t.Errorf("UpdatedAt not set: %+v", got)
		}
		got.UpdatedAt = time.Time{}
		if fmt.Sprintf("%#v", got.Retry) != fmt.Sprintf("%#v", e.Retry) || got.URL != e.URL || got.Timeout != e.Timeout ||
			got.MaxInFlight != 8 || !slices.Equal(got.Secrets, e.Secrets) || got.Headers["Authorization"] != "Bearer t0ken" || got.Disabled {
			t.Fatalf("GetEndpoint = %+v, want %+v", got, e)
		}

		// Replace: created is false and the new value is read back.
		e.URL = "https://billing.example.com/v2"
		e.Secrets = e.Secrets[1:]
		if created, err := q.Endpoints().Put(ctx, e, nil); err != nil || created {
			t.Fatalf("replace: PutEndpoint = %v, %v; want not created", created, err)
		}
		other := billing()
		other.Name = "audit"
		if _, err := q.Endpoints().Put(ctx, other, nil); err != nil {
			t.Fatal(err)
		}
		list, err := q.Endpoints().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Name != "audit" || list[1].Name != "billing" || list[1].URL != e.URL || len(list[1].Secrets) != 1 {
			t.Fatalf("ListEndpoints = %v", list)
		}

		off, err := q.Endpoints().SetEnabled(ctx, "billing", false)
		if err != nil || !off.Disabled {
			t.Fatalf("disable = %+v, %v", off, err)
		}
		if got, _ := q.Endpoints().Get(ctx, "billing"); !got.Disabled || got.URL != e.URL {
			t.Fatalf("after disable: %+v", got)
		}
		if on, err := q.Endpoints().SetEnabled(ctx, "billing", true); err != nil || on.Disabled {
			t.Fatalf("enable = %+v, %v", on, err)
		}

		if err := q.Endpoints().Delete(ctx, "billing"); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Endpoints().Get(ctx, "billing"); !errors.Is(err, queue.ErrEndpointNotFound) {
			t.Fatalf("Get after delete: %v, want ErrEndpointNotFound", err)
		}
		if err := q.Endpoints().Delete(ctx, "billing"); !errors.Is(err, queue.ErrEndpointNotFound) {
			t.Fatalf("second delete: %v, want ErrEndpointNotFound", err)
		}
		if _, err := q.Endpoints().SetEnabled(ctx, "billing", true); !errors.Is(err, queue.ErrEndpointNotFound) {
			t.Fatalf("enable a deleted endpoint: %v, want ErrEndpointNotFound", err)
		}
		// A deleted endpoint may no longer be named, on any shard.
		_, err = q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "after-delete", Due: time.Now().Add(time.Hour), Endpoint: "billing"}})
		if !errors.Is(err, queue.ErrEndpointNotFound) {
			t.Fatalf("schedule to a deleted endpoint: %v", err)
		}
	})
}

// Each bad endpoint is refused with an error naming the problem, and
// nothing is written.
func TestEndpointBadInputWritesNothing(t *testing.T) {
	mod := func(f func(e *queue.Endpoint)) queue.Endpoint { e := billing(); f(&e); return e }
	bad := []struct {
		name string
		e    queue.Endpoint
		want string
	}{
		{"ftp scheme", mod(func(e *queue.Endpoint) { e.URL = "ftp://example.com/x" }), `scheme "ftp"`},
		{"no scheme", mod(func(e *queue.Endpoint) { e.URL = "example.com/x" }), "scheme"},
		{"userinfo", mod(func(e *queue.Endpoint) { e.URL = "https://user:pw@example.com/x" }), "user information"},
		{"no host", mod(func(e *queue.Endpoint) { e.URL = "https:///x" }), "no host"},
		{"fragment", mod(func(e *queue.Endpoint) { e.URL = "https://example.com/x#y" }), "fragment"},
		{"loopback", mod(func(e *queue.Endpoint) { e.URL = "http://127.0.0.1:8080/x" }), "127.0.0.0/8"},
		{"private", mod(func(e *queue.Endpoint) { e.URL = "http://10.1.2.3/x" }), "10.0.0.0/8"},
		{"metadata", mod(func(e *queue.Endpoint) { e.URL = "http://169.254.169.254/latest" }), "169.254.0.0/16"},
		{"v6 loopback", mod(func(e *queue.Endpoint) { e.URL = "http://[::1]/x" }), "::1/128"},
		{"mapped v4", mod(func(e *queue.Endpoint) { e.URL = "http://[::ffff:192.168.1.1]/x" }), "192.168.0.0/16"},
		{"localhost", mod(func(e *queue.Endpoint) { e.URL = "http://localhost:9000/x" }), "loopback"},
		{"hex v4", mod(func(e *queue.Endpoint) { e.URL = "http://0x7f000001/x" }), "four decimal numbers"},
		{"short v4", mod(func(e *queue.Endpoint) { e.URL = "http://127.1/x" }), "four decimal numbers"},
		{"full-width v4", mod(func(e *queue.Endpoint) { e.URL = "http://１２７．０．０．１/x" }), "the address 127.0.0.1"},
		{"6to4 link-local", mod(func(e *queue.Endpoint) { e.URL = "http://[2002:a9fe:a9fe::]/x" }), "6to4 for 169.254.169.254"},
		{"short secret", mod(func(e *queue.Endpoint) { e.Secrets = []queue.Secret{testSecret('s', 16)} }), "16 bytes"},
		{"no prefix", mod(func(e *queue.Endpoint) { e.Secrets = []queue.Secret{"a-long-enough-secret-without-its-prefix"} }), `"whsec_"`},
		{"bad base64", mod(func(e *queue.Endpoint) { e.Secrets = []queue.Secret{"whsec_!!!!notbase64!!!!notbase64!!!!"} }), "base64"},
		{"no secret", mod(func(e *queue.Endpoint) { e.Secrets = nil }), "0 signing secrets"},
		{"repeated secret", mod(func(e *queue.Endpoint) { e.Secrets = []queue.Secret{testSecret('a', 32), testSecret('a', 32)} }), "repeats"},
		{"bad name", mod(func(e *queue.Endpoint) { e.Name = "bill ing" }), "name"},
		{"empty name", mod(func(e *queue.Endpoint) { e.Name = "" }), "name"},
		{"reserved header", mod(func(e *queue.Endpoint) { e.Headers = map[string]string{"webhook-signature": "x"} }), "set by the delivery"},
		{"host header", mod(func(e *queue.Endpoint) { e.Headers = map[string]string{"host": "x"} }), "set by the delivery"},
		{"header CRLF", mod(func(e *queue.Endpoint) { e.Headers = map[string]string{"X-A": "a\r\nX-B: b"} }), "line break"},
		{"header name", mod(func(e *queue.Endpoint) { e.Headers = map[string]string{"X A": "a"} }), "token"},
		{"redacted header value", mod(func(e *queue.Endpoint) {
			e.Headers = map[string]string{"Authorization": queue.RedactHeader("Bearer t0ken")}
		}), "redacted"},
		{"negative timeout", mod(func(e *queue.Endpoint) { e.Timeout = -1 }), "timeout"},
		{"long timeout", mod(func(e *queue.Endpoint) { e.Timeout = time.Hour }), "timeout"},
		{"negative attempts", mod(func(e *queue.Endpoint) { e.Retry.MaxAttempts = -1 }), "negative"},
		{"base above cap", mod(func(e *queue.Endpoint) { e.Retry.Base = time.Hour }), "above its cap"},
		{"negative in flight", mod(func(e *queue.Endpoint) { e.MaxInFlight = -2 }), "in flight"},
	}
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		for _, c := range bad {
			_, err := q.Endpoints().Put(ctx, c.e, nil)
			if !errors.Is(err, queue.ErrInvalidEndpoint) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: PutEndpoint: %v; want ErrInvalidEndpoint saying %q", c.name, err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s", 16)))) {
				t.Errorf("%s: the error repeats the secret: %v", c.name, err)
			}
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Fatalf("refused puts wrote %v", keys)
		}
		// The operator's allow list admits a private address.
		e := mod(func(e *queue.Endpoint) { e.URL = "http://127.0.0.1:8080/x" })
		if _, err := q.Endpoints().Put(ctx, e, &queue.PutEndpointOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}); err != nil {
			t.Fatalf("allowed loopback: %v", err)
		}
		// localhost is refused even so, as the dispatcher's guard does:
		// the address is what an allow rule names.
		if _, err := q.Endpoints().Put(ctx, mod(func(e *queue.Endpoint) { e.URL = "http://localhost:8080/x" }),
			&queue.PutEndpointOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}); !errors.Is(err, queue.ErrPrivateAddress) {
			t.Fatalf("localhost with 127.0.0.0/8 allowed: %v, want ErrPrivateAddress", err)
		}
		// What only the delivery engine's guard knows is refused too: a
		// cloud metadata address inside an allowed range.
		_, err := q.Endpoints().Put(ctx, mod(func(e *queue.Endpoint) { e.URL = "http://169.254.169.254/latest" }),
			&queue.PutEndpointOptions{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}})
		if !errors.Is(err, queue.ErrPrivateAddress) || !strings.Contains(err.Error(), "metadata") {
			t.Fatalf("metadata address with 169.254.0.0/16 allowed: %v, want ErrPrivateAddress naming metadata", err)
		}
	})
}

func TestEndpointSecretsAreRedacted(t *testing.T) {
	e := billing()
	full := e.Secrets[0].Reveal()
	js, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string]string{
		"String": e.String(), "%v": fmt.Sprintf("%v", e), "%+v": fmt.Sprintf("%+v", e), "%#v": fmt.Sprintf("%#v", e),
		//lint:ignore S1025 what is under test is what fmt's %s prints, not String alone
		"JSON": string(js), "secret %s": fmt.Sprintf("%s", e.Secrets[0]),
	} {
		if strings.Contains(out, full[len(queue.SecretPrefix):len(queue.SecretPrefix)+12]) {
			t.Errorf("%s shows the secret: %s", what, out)
		}
		if !strings.Contains(out, e.Secrets[0].Redacted()) && what != "%#v" {
			t.Errorf("%s does not show the redacted form %s: %s", what, e.Secrets[0].Redacted(), out)
		}
	}
	if e.Secrets[0].Redacted() == e.Secrets[1].Redacted() {
		t.Errorf("two secrets redact alike: %s", e.Secrets[0].Redacted())
	}
}

// TestEndpointHeaderValuesAreRedacted: header values often carry
// credentials (Authorization: Bearer …), so every form an Endpoint is
// shown in (String, fmt's verbs, JSON, as slog prints it) shows them as
// RedactHeader's fingerprint, never whole; two values redact apart.
func TestEndpointHeaderValuesAreRedacted(t *testing.T) {
	e := billing()
	e.Headers["X-Api-Key"] = "k3y-material-0123"
	js, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var text, jsonLog bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("x", "endpoint", e)
	slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("x", "endpoint", e)
	for what, out := range map[string]string{
		"String": e.String(), "%v": fmt.Sprintf("%v", e), "%+v": fmt.Sprintf("%+v", e), "%#v": fmt.Sprintf("%#v", e),
		"JSON": string(js), "slog text": text.String(), "slog JSON": jsonLog.String(),
	} {
		for _, v := range []string{"t0ken", "k3y-material"} {
			if strings.Contains(out, v) {
				t.Errorf("%s shows a header value: %s", what, out)
			}
		}
		if !strings.Contains(out, queue.RedactHeader("Bearer t0ken")) {
			t.Errorf("%s does not show the redacted value %s: %s", what, queue.RedactHeader("Bearer t0ken"), out)
		}
	}
	r := e.RedactedHeaders()
	if len(r) != 2 || r["Authorization"] != queue.RedactHeader("Bearer t0ken") || e.Headers["Authorization"] != "Bearer t0ken" {
		t.Errorf("RedactedHeaders = %v (headers now %v)", r, e.Headers)
	}
	if a, b := queue.RedactHeader("Bearer a"), queue.RedactHeader("Bearer b"); a == b || !queue.IsRedactedHeader(a) || queue.IsRedactedHeader("Bearer a") {
		t.Errorf("RedactHeader: %q and %q; IsRedactedHeader wrong", a, b)
	}
	if r := (queue.Endpoint{}).RedactedHeaders(); r == nil || len(r) != 0 {
		t.Errorf("RedactedHeaders of none = %#v, want an empty map", r)
	}
}

// A timer that names an endpoint carries the name to its fire event; one
// that names a missing endpoint is refused at schedule time with nothing
// written, and so is the whole batch it is in.
func TestScheduleDeliverToEndpoint(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		past := time.Now().Add(-time.Second)
		_, err := q.ScheduleBatch(ctx, []queue.NewTimer{
			{ID: "plain", Due: past, Payload: []byte("x")},
			{ID: "to-billing", Due: past, Payload: []byte("x"), Endpoint: "billing"},
		})
		if !errors.Is(err, queue.ErrEndpointNotFound) || !strings.Contains(err.Error(), `"billing"`) {
			t.Fatalf("schedule to a missing endpoint: %v, want ErrEndpointNotFound naming it", err)
		}
		// The script's refusal is an answer: nothing ran, so the outcome
		// is known, whichever shard (script or pre-check) refused it.
		if errors.Is(err, queue.ErrOutcomeUnknown) {
			t.Fatalf("schedule to a missing endpoint: %v, reported as ErrOutcomeUnknown", err)
		}
		_, err = q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "to-billing", Due: past, Payload: []byte("x"), Endpoint: "billing"}})
		if !errors.Is(err, queue.ErrEndpointNotFound) || errors.Is(err, queue.ErrOutcomeUnknown) {
			t.Fatalf("one timer to a missing endpoint: %v, want ErrEndpointNotFound and not ErrOutcomeUnknown", err)
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Fatalf("the refused schedule wrote %v", keys)
		}
		if _, err := q.Endpoints().Put(ctx, billing(), nil); err != nil {
			t.Fatal(err)
		}
		ids := []string{"plain"}
		timers := []queue.NewTimer{{ID: "plain", Due: past, Payload: []byte("x")}}
		for i := range 20 { // spread over the shards
			id := fmt.Sprintf("to-billing-%d", i)
			ids = append(ids, id)
			timers = append(timers, queue.NewTimer{ID: id, Due: past, Payload: []byte("body"), Endpoint: "billing"})
		}
		res, err := q.ScheduleBatch(ctx, timers)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if !r.Created {
				t.Fatalf("not created: %+v", r)
			}
		}
		fired := claimAll(t, q)
		if len(fired) != len(ids) {
			t.Fatalf("fired %d, want %d", len(fired), len(ids))
		}
		got := map[string]string{}
		for _, m := range fireEntries(t, b, q) {
			ep, _ := m.Values["endpoint"].(string)
			got[m.Values["id"].(string)] = ep
		}
		for _, id := range ids {
			want := "billing"
			if id == "plain" {
				want = ""
			}
			if got[id] != want {
				t.Errorf("fire event of %s: endpoint %q, want %q", id, got[id], want)
			}
		}
		events, _, err := q.Inspect().RecentFires(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if want := map[bool]string{true: "", false: "billing"}[ev.ID == "plain"]; ev.Endpoint != want {
				t.Errorf("Event %s: Endpoint %q, want %q", ev.ID, ev.Endpoint, want)
			}
		}
		// The fire moved the names out: no deliveries hash is left behind.
		n, err := q.Inspect().Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range keyspace.Shards(q.Namespace(), n) {
			if c, err := b.Client.Exists(ctx, sp.Deliveries()).Result(); err != nil || c != 0 {
				t.Fatalf("%s after the fires: exists=%d, %v", sp.Deliveries(), c, err)
			}
		}
	})
}

// A cancelled delivering timer's endpoint name goes when it is purged.
func TestPurgeDropsCancelledDelivery(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{Retention: time.Millisecond})
		if _, err := q.Endpoints().Put(ctx, billing(), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "c", Due: time.Now().Add(time.Hour), Endpoint: "billing"}}); err != nil {
			t.Fatal(err)
		}
		deliveries := keyspace.Shard(q.Namespace(), 0, 1).Deliveries()
		if v, err := b.Client.HGet(ctx, deliveries, "c").Result(); err != nil || v != "billing" {
			t.Fatalf("deliveries[c] = %q, %v", v, err)
		}
		if _, err := q.Cancel(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, 10*time.Second, "purge of c", func() bool {
			removed, _, err := q.Engine().Purge(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			return removed == 1
		})
		if c, err := b.Client.Exists(ctx, deliveries).Result(); err != nil || c != 0 {
			t.Fatalf("deliveries after purge: exists=%d, %v", c, err)
		}
	})
}

// A recurring schedule may deliver: each occurrence's fire event names its
// endpoint; a schedule naming a missing endpoint is refused with nothing
// written, and an update that drops the endpoint stops its occurrences
// delivering.
func TestRecurringDeliverToEndpoint(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		r := queue.Recurring{ID: "tick", Every: 50 * time.Millisecond, Endpoint: "billing", Ahead: 3}
		if _, _, err := q.Recurring().Put(ctx, r); !errors.Is(err, queue.ErrEndpointNotFound) {
			t.Fatalf("PutRecurring to a missing endpoint: %v, want ErrEndpointNotFound", err)
		}
		if keys := nsKeys(t, b, q); len(keys) != 0 {
			t.Fatalf("the refused schedule wrote %v", keys)
		}
		if _, err := q.Endpoints().Put(ctx, billing(), nil); err != nil {
			t.Fatal(err)
		}
		info, created, err := q.Recurring().Put(ctx, r)
		if err != nil || !created || info.Recurring.Endpoint != "billing" {
			t.Fatalf("PutRecurring = %+v, %v, %v", info, created, err)
		}
		got, err := q.Recurring().Get(ctx, "tick")
		if err != nil || got.Recurring.Endpoint != "billing" || len(got.Pending) == 0 {
			t.Fatalf("GetRecurring = %+v, %v", got, err)
		}
		n, err := q.Inspect().Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		deliveries := keyspace.Shard(q.Namespace(), keyspace.ScheduleShard("tick", n), n).Deliveries()
		for _, o := range got.Pending {
			if v, err := b.Client.HGet(ctx, deliveries, o.ID).Result(); err != nil || v != "billing" {
				t.Fatalf("pending occurrence %s: deliver = %q, %v", o.ID, v, err)
			}
		}
		var fired []queue.Fired
		redistest.Eventually(t, 10*time.Second, "an occurrence to fire", func() bool { fired = claimAll(t, q); return len(fired) > 0 })
		// The occurrences the materializer arms after a fire deliver too.
		if armed, err := q.Engine().ArmFired(ctx, fired); err != nil || armed == 0 {
			t.Fatalf("ArmFired = %d, %v", armed, err)
		}
		if got, err = q.Recurring().Get(ctx, "tick"); err != nil {
			t.Fatal(err)
		}
		for _, o := range got.Pending {
			if v, err := b.Client.HGet(ctx, deliveries, o.ID).Result(); err != nil || v != "billing" {
				t.Fatalf("occurrence %s armed after a fire: deliver = %q, %v", o.ID, v, err)
			}
		}
		events, _, err := q.Inspect().RecentFires(ctx, 10)
		if err != nil || len(events) == 0 {
			t.Fatalf("RecentFires = %v, %v", events, err)
		}
		for _, ev := range events {
			if ev.Endpoint != "billing" {
				t.Errorf("occurrence %s: Endpoint %q, want billing", ev.ID, ev.Endpoint)
			}
		}
		// An update that drops the endpoint: the occurrences it arms do not
		// deliver.
		r.Endpoint, r.Every = "", time.Hour
		info, err = q.Recurring().Update(ctx, r)
		if err != nil || len(info.Pending) == 0 {
			t.Fatalf("UpdateRecurring = %+v, %v", info, err)
		}
		for _, o := range info.Pending {
			if c, err := b.Client.HExists(ctx, deliveries, o.ID).Result(); err != nil || c {
				t.Fatalf("after the update, %s still delivers (%v)", o.ID, err)
			}
		}
		r.Endpoint = "nope"
		if _, err := q.Recurring().Update(ctx, r); !errors.Is(err, queue.ErrEndpointNotFound) {
			t.Fatalf("update to a missing endpoint: %v", err)
		}
	})
}

// An endpoint put before its namespace was created with several shards
// may be named by timers on every shard once it is.
func TestEndpointBeforeShardedNamespace(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		before, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer before.Close()
		if _, err := before.Endpoints().Put(ctx, billing(), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, 8); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		for i := range 16 { // one timer at a time: each checked in its shard's script
			id := fmt.Sprintf("t-%d", i)
			if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: id, Due: time.Now().Add(time.Hour), Endpoint: "billing"}}); err != nil {
				t.Fatalf("schedule %s (shard of 8): %v", id, err)
			}
		}
	})
}

// FuzzEndpointURL: whatever ValidateEndpoint accepts as a URL is an
// absolute http or https URL with a host, without user information or
// fragment, whose host is no refused address literal.
func FuzzEndpointURL(f *testing.F) {
	for _, s := range []string{"https://example.com/x", "http://127.0.0.1/", "http://[::ffff:10.0.0.1]/", "https://u@h/",
		"HTTP://EXAMPLE.COM", "http://0x7f.1/", "http://localhost./", "https://h/#f", "//h/p", "http://[fe80::1%25eth0]/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		e := billing()
		e.URL = raw
		if queue.ValidateEndpoint(e, nil) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || strings.Contains(raw, "#") {
			t.Fatalf("accepted %q: %+v, %v", raw, u, err)
		}
		if a, err := netip.ParseAddr(strings.TrimSuffix(u.Hostname(), ".")); err == nil {
			a = a.Unmap()
			if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() {
				t.Fatalf("accepted %q, whose host %v is refused by default", raw, a)
			}
		}
	})
}

// Endpoint.Deliver hands the delivery engine every field, secrets whole.
func TestEndpointDeliverMapsEveryField(t *testing.T) {
	e := billing()
	e.Disabled, e.Retry.RetryClientErrors = true, true
	d, err := e.Deliver(nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != e.Name || d.URL != e.URL || d.Headers["Authorization"] != "Bearer t0ken" || d.Timeout != e.Timeout ||
		d.MaxInFlight != e.MaxInFlight || !d.Disabled || d.Policy.MaxAttempts != 7 || d.Policy.MaxAge != time.Hour ||
		d.Policy.Base != 500*time.Millisecond || d.Policy.Cap != time.Minute || !d.Policy.RetryClientErrors ||
		len(d.Secrets) != 2 || d.Secrets[0].Text() != e.Secrets[0].Reveal() || d.Secrets[1].Text() != e.Secrets[1].Reveal() {
		t.Fatalf("Deliver = %+v", d)
	}
	// The default guard refuses a private address; an allow rule admits it.
	e.URL = "http://127.0.0.1:9/"
	if _, err := e.Deliver(nil); !errors.Is(err, deliver.ErrRefused) {
		t.Fatalf("Deliver of a loopback URL without an allow rule: %v", err)
	}
	if _, err := e.Deliver(&deliver.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}); err != nil {
		t.Fatalf("Deliver with 127.0.0.1 allowed: %v", err)
	}
}
