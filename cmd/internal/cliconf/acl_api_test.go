package cliconf_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/cmd/internal/worker"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// apiOnlyServesEveryRoute runs an API-only timerworker (--api-addr on
// loopback, --claim=false) as the Redis user of redisURL and calls every
// route of api/openapi.json on namespace ns, each with a request that
// does its work (a real lease, ack, release and requeue of fires the
// admin's queue q fired), and fails on any answer but the one expected:
// a right the user lacks answers 502 permission-denied, naming it.
func apiOnlyServesEveryRoute(t *testing.T, ctx context.Context, redisURL, ns string, q *queue.Queue) {
	t.Helper()
	urls := make(chan string, 1)
	var logBuf redistest.SyncBuffer
	done, stop := startWorker(t, ctx, worker.Config{
		Conn:         cliconf.Conn{RedisURL: redisURL},
		Namespaces:   []string{ns},
		NoClaim:      true,
		API:          apiserver.Config{Addr: "127.0.0.1:0"},
		APIListening: func(u string) { urls <- u },
	}, &logBuf)
	defer func() {
		stop()
		if t.Failed() {
			t.Logf("timerworker log:\n%s", logBuf.String())
		}
	}()
	var base string
	select {
	case base = <-urls:
	case err := <-done:
		done <- err
		t.Fatalf("the API-only timerworker exited under the documented api line: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the API did not listen within 30s")
	}

	c := &http.Client{Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	called := map[string]bool{}
	nsp := "/v1/namespaces/" + ns
	// call sends a request to the route tmpl (its path in the contract)
	// at path, and returns the answer's JSON if it has the status want.
	call := func(method, tmpl, path string, body any, want int) map[string]any {
		t.Helper()
		called[method+" "+tmpl] = true
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			// A stream: its first poll of the fire streams, or a problem
			// event if Redis refused it.
			buf := make([]byte, 4096)
			n, _ := io.ReadAtLeast(resp.Body, buf, 1)
			if resp.StatusCode != want || strings.Contains(string(buf[:n]), "event: problem") {
				t.Errorf("%s %s under the documented api line = %d %s, want %d", method, path, resp.StatusCode, buf[:n], want)
			}
			return nil
		}
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Errorf("%s %s under the documented api line = %d %s, want %d", method, path, resp.StatusCode, raw, want)
			return nil
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }

	call("GET", "/v1/openapi.json", "/v1/openapi.json", nil, 200)
	call("PUT", "/v1/namespaces/{ns}", nsp, map[string]any{"shards": 1}, 201)
	call("GET", "/v1/namespaces/{ns}", nsp, nil, 200) // stats
	tp := "/v1/namespaces/{ns}/timers"
	call("POST", tp, nsp+"/timers", map[string]any{"id": "t1", "in": "1h", "payload_text": "p"}, 201)
	call("POST", tp+"/batch", nsp+"/timers/batch", map[string]any{"timers": []map[string]any{{"id": "b1", "in": "1h"}, {"id": "b2", "in": "1h"}}}, 200)
	call("GET", tp, nsp+"/timers?limit=1", nil, 200)
	call("GET", tp+"/{id}", nsp+"/timers/t1", nil, 200)
	call("POST", tp+"/{id}/reschedule", nsp+"/timers/t1/reschedule", map[string]any{"in": "2h"}, 200)
	call("POST", tp+"/{id}/cancel", nsp+"/timers/b1/cancel", nil, 200)
	call("POST", tp+"/{id}/fire", nsp+"/timers/b2/fire", nil, 200)
	job := call("POST", tp+"/cancel", nsp+"/timers/cancel", map[string]any{"id_prefix": "b"}, 200)
	call("GET", "/v1/namespaces/{ns}/cancel-jobs", nsp+"/cancel-jobs", nil, 200)
	call("GET", "/v1/namespaces/{ns}/cancel-jobs/{id}", nsp+"/cancel-jobs/"+str(job, "id"), nil, 200)
	// An owner's timers, its epoch and next wake, a bump that cancels the
	// older ones, and a bulk cancel by owner and label.
	op := "/v1/namespaces/{ns}/owners/{owner}"
	call("POST", tp, nsp+"/timers", map[string]any{"id": "w1", "in": "1h", "owner": "wf-1", "labels": map[string]string{"k": "v"}, "fire_within_ms": 1000}, 201)
	call("GET", tp, nsp+"/timers?owner=wf-1&label=k=v", nil, 200)
	call("GET", op, nsp+"/owners/wf-1", nil, 200)
	call("POST", op+"/epoch", nsp+"/owners/wf-1/epoch", map[string]any{"cancel_older": true}, 200)
	call("POST", tp, nsp+"/timers", map[string]any{"id": "w2", "in": "1h", "owner": "wf-1", "epoch": 1}, 201)
	call("POST", tp+"/cancel", nsp+"/timers/cancel", map[string]any{"owner": "wf-1", "labels": map[string]string{"k": "v"}}, 200)
	call("GET", tp+"/{id}/wait", nsp+"/timers/t1/wait?timeout=100ms", nil, 200) // nothing claims: the timeout passes
	call("POST", "/v1/namespaces/{ns}/debounce/{key}", nsp+"/debounce/k1", map[string]any{"delay": "1h", "max_wait": "2h"}, 201)

	sp := "/v1/namespaces/{ns}/schedules"
	call("POST", sp, nsp+"/schedules", map[string]any{"id": "s1", "every": "1h"}, 201)
	call("GET", sp, nsp+"/schedules?limit=10", nil, 200)
	call("GET", sp+"/{id}", nsp+"/schedules/s1", nil, 200)
	call("PUT", sp+"/{id}", nsp+"/schedules/s1", map[string]any{"cron": "0 3 * * *", "tz": "Europe/Berlin"}, 200)
	call("POST", sp+"/{id}/pause", nsp+"/schedules/s1/pause", nil, 200)
	call("POST", sp+"/{id}/resume", nsp+"/schedules/s1/resume", nil, 200)
	call("DELETE", sp+"/{id}", nsp+"/schedules/s1", nil, 204)

	ep := "/v1/namespaces/{ns}/endpoints"
	secret := queue.SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("k"), 32))
	call("PUT", ep+"/{name}", nsp+"/endpoints/e1", map[string]any{"url": "https://hooks.example.com/h", "secrets": []string{secret}}, 201)
	call("GET", ep, nsp+"/endpoints", nil, 200)
	call("GET", ep+"/{name}", nsp+"/endpoints/e1", nil, 200)
	call("POST", ep+"/{name}/disable", nsp+"/endpoints/e1/disable", nil, 200)
	call("POST", ep+"/{name}/enable", nsp+"/endpoints/e1/enable", nil, 200)
	call("GET", "/v1/namespaces/{ns}/delivery-policy", nsp+"/delivery-policy", nil, 200)
	call("PUT", "/v1/namespaces/{ns}/delivery-policy", nsp+"/delivery-policy", map[string]any{"allow_timer_urls": true}, 200)
	call("GET", "/v1/namespaces/{ns}/quotas", nsp+"/quotas", nil, 200)
	call("PUT", "/v1/namespaces/{ns}/quotas", nsp+"/quotas", map[string]any{"pending": 1000}, 200)
	call("POST", tp, nsp+"/timers", map[string]any{"id": "d1", "in": "1h", "deliver": map[string]any{"endpoint": "e1", "url": "https://tenant.example.com/h"}}, 201)
	fp := "/v1/namespaces/{ns}/flow-policies"
	call("PUT", fp, nsp+"/flow-policies", map[string]any{"key": "k", "rate": 5, "period": "1s", "max_in_flight": 2}, 200)
	call("GET", fp, nsp+"/flow-policies", nil, 200)
	call("GET", "/v1/namespaces/{ns}/groups/{group}/flows", nsp+"/groups/g1/flows?limit=10", nil, 200)
	call("DELETE", fp, nsp+"/flow-policies?key=k", nil, 204)

	// Pull consumption of two fires the admin fires: the replica claims
	// nothing.
	for _, id := range []string{"c1", "c2"} {
		if _, err := q.Schedule(ctx, id, time.Now().Add(-time.Second), []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Engine().Claim(ctx, 100); err != nil {
		t.Fatal(err)
	}
	gp := "/v1/namespaces/{ns}/groups/{group}"
	g := nsp + "/groups/g1"
	rules := map[string]any{"lease": "5s", "max_attempts": 1}
	with := func(m map[string]any) map[string]any {
		for k, v := range rules {
			m[k] = v
		}
		return m
	}
	leased := call("POST", gp+"/lease", g+"/lease", with(map[string]any{"consumer": "w1", "count": 100}), 200)
	ids := map[string]string{}
	if ds, ok := leased["deliveries"].([]any); ok {
		for _, d := range ds {
			m, _ := d.(map[string]any)
			ids[str(m, "id")] = str(m, "delivery_id")
		}
	}
	if ids["c1"] == "" || ids["c2"] == "" {
		t.Fatalf("the lease handed out %v, want c1 and c2", ids)
	}
	call("POST", gp+"/deliveries/{delivery}/extend", g+"/deliveries/"+ids["c1"]+"/extend", with(map[string]any{"lease_for": "4s"}), 200)
	call("POST", gp+"/ack", g+"/ack", map[string]any{"delivery_ids": []string{ids["c1"]}}, 200)
	rel := call("POST", gp+"/deliveries/{delivery}/release", g+"/deliveries/"+ids["c2"]+"/release", with(map[string]any{"error": "boom"}), 200)
	call("GET", gp+"/dead-letters", g+"/dead-letters?limit=10", nil, 200)
	if dead := str(rel, "dead_letter_id"); dead != "" {
		call("POST", gp+"/dead-letters/{dead}/requeue", g+"/dead-letters/"+dead+"/requeue", nil, 200)
	} else {
		t.Errorf("the release of c2's last attempt answered %v, want a dead_letter_id", rel)
	}
	call("GET", "/v1/namespaces/{ns}/fires", nsp+"/fires?after=0", nil, 200)
	call("DELETE", ep+"/{name}", nsp+"/endpoints/e1", nil, 204)

	// Every route of the contract was called.
	raw, err := os.ReadFile("../../../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var missed []string
	for path, ops := range doc.Paths {
		for m := range ops {
			op := strings.ToUpper(m)
			switch op {
			case "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH":
			default:
				continue // parameters, summary
			}
			if !called[op+" "+path] {
				missed = append(missed, op+" "+path)
			}
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("the api line's walk calls no %s: add each route of api/openapi.json to it", strings.Join(missed, ", "))
	}
}
