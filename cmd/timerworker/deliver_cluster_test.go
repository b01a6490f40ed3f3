package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
)

// TestDeliverOnClusterAcrossACrash is the "done when" on the
// 16-shard Cluster: a service we stand in for creates a 16-shard namespace,
// registers an endpoint and schedules 2,000 timers, all over the HTTP API
// (an API-only timerworker replica) with an admin token, and receives
// signed POSTs from two timerworker --deliver replicas (each also
// claiming), one of which is SIGKILLed mid-run. Every timer is received at least once, none before its due
// time (the receiver and Redis share this host's clock), every signature
// verifies, a timer received twice has one webhook-id (the receiver's
// deduplication key), and every shard's timers arrive; the number
// received more than once is logged. A request cut short by the kill does
// not count as received, so the killed replica's fires must come again.
func TestDeliverOnClusterAcrossACrash(t *testing.T) {
	t.Parallel() // servers of its own; see docs/development.md, "Loops"
	c := redistest.StartCluster(t, 3, nil)
	ns := redistest.Namespace(t)
	tok, tk, err := apitoken.Mint("service", []string{ns}, []apitoken.Right{apitoken.Read, apitoken.Write, apitoken.Admin})
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(tk.Line()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := deliver.GenerateSecret()
	key, _ := deliver.ParseSecret(secret)

	type receipt struct {
		at, due, fired time.Time
		webhookID      string
		sigErr         error
	}
	var mu sync.Mutex
	got := map[string][]receipt{}
	cut := 0 // requests whose sender died before the answer
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		rc := receipt{at: at, webhookID: r.Header.Get(deliver.HeaderID), sigErr: deliver.Verify(r.Header, body, at, key)}
		rc.due, _ = time.Parse(time.RFC3339Nano, r.Header.Get(deliver.HeaderDueAt))
		rc.fired, _ = time.Parse(time.RFC3339Nano, r.Header.Get(deliver.HeaderFiredAt))
		var p struct{ ID string }
		if err := json.Unmarshal(body, &p); err != nil || p.ID != r.Header.Get(deliver.HeaderTimerID) {
			rc.sigErr = fmt.Errorf("body %q is not timer %s's payload", body, r.Header.Get(deliver.HeaderTimerID))
		}
		// Each answer takes a while, so that each replica has many
		// attempts under way when one is killed (wall time is what is
		// under test: fires in flight at the crash). A request whose
		// sender died before the answer does not count as received: its
		// fire must come again from the survivor.
		select {
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
			mu.Lock()
			cut++
			mu.Unlock()
			return
		}
		mu.Lock()
		got[p.ID] = append(got[p.ID], rc)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}

	// A short lease, so that the fires the killed replica held are taken
	// over within seconds.
	args := []string{"--redis", c.URL(), "--namespace", ns, "--deliver", "--deliver-allow", "127.0.0.1/32", "--deliver-lease", "2s"}
	front := startWorker(t, "--redis", c.URL(), "--namespace", ns, "--claim=false", "--api-addr", "127.0.0.1:0", "--api-tokens-file", tokens,
		"--deliver-allow", "127.0.0.1/32")
	var base string
	waitFor(t, 20*time.Second, "the API to listen", func() bool {
		m := apiURL.FindStringSubmatch(front.logText())
		if m != nil {
			base = m[1] + "/v1/namespaces/" + ns
		}
		return m != nil
	})
	call := func(method, url string, body any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, url, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, out)
		}
	}
	call("PUT", base, map[string]any{"shards": 16})
	call("PUT", base+"/endpoints/service", map[string]any{"url": sink.URL + "/hooks", "secrets": []string{secret}, "max_in_flight": 32})
	survivor, doomed := startWorker(t, args...), startWorker(t, args...)
	waitFor(t, 20*time.Second, "both delivering replicas to claim shards", func() bool {
		return strings.Contains(survivor.logText(), "claiming shards") && strings.Contains(doomed.logText(), "claiming shards")
	})

	const n = 2000
	var ids []string
	for start := 0; start < n; start += 500 {
		var timers []map[string]any
		for i := start; i < start+500; i++ {
			id := fmt.Sprint("c", i)
			ids = append(ids, id)
			// Due over 5 s, from 2 s on: after the schedule calls end.
			in := 2*time.Second + time.Duration(i)*5*time.Second/n
			timers = append(timers, map[string]any{"id": id, "in": in.String(), "payload_text": `{"id":"` + id + `"}`,
				"deliver": map[string]any{"endpoint": "service"}})
		}
		call("POST", base+"/timers/batch", map[string]any{"timers": timers})
	}
	waitFor(t, 30*time.Second, "a third of the timers to arrive", func() bool { return received() >= n/3 })
	doomed.kill()
	killedAt := received()
	func() {
		defer func() { // runs when waitFor fails, too
			if r := received(); r < n {
				mu.Lock()
				missing := map[int]int{}
				for _, id := range ids {
					if len(got[id]) == 0 {
						missing[keyspace.ShardOf(id, 16)]++
					}
				}
				mu.Unlock()
				t.Errorf("%d of %d timers arrived within a minute; missing by shard %v\nsurvivor's log:\n%s", r, n, missing, survivor.logText())
			}
		}()
		waitFor(t, time.Minute, "every timer to arrive after the kill", func() bool { return received() >= n })
	}()
	for name, w := range map[string]*proc{"API replica": front, "surviving replica": survivor} {
		if code, _ := w.term(); code != 0 {
			t.Errorf("the %s: exit %d on SIGTERM; log:\n%s", name, code, w.logText())
		}
	}

	mu.Lock()
	defer mu.Unlock()
	dup, extra, early, bad := 0, 0, 0, 0
	shards := map[int]int{}
	for _, id := range ids {
		rs := got[id]
		if len(rs) > 0 {
			shards[keyspace.ShardOf(id, 16)]++
		}
		if len(rs) > 1 {
			dup++
			extra += len(rs) - 1
		}
		for _, r := range rs {
			if r.due.IsZero() || r.at.Before(r.due) || r.fired.Before(r.due) {
				early++
			}
			if r.sigErr != nil {
				bad++
				if bad <= 3 {
					t.Errorf("%s: %v", id, r.sigErr)
				}
			}
			if r.webhookID != rs[0].webhookID {
				t.Errorf("%s arrived with webhook-ids %s and %s; one fire must keep one", id, rs[0].webhookID, r.webhookID)
			}
		}
	}
	t.Logf("killed one of two replicas after %d of %d timers arrived, cutting %d requests under way; %d received more than once (%d extra requests)",
		killedAt, n, cut, dup, extra)
	if len(got) != n || early != 0 || bad != 0 {
		t.Fatalf("%d of %d timers received, %d requests before their due time, %d bad signatures or bodies", len(got), n, early, bad)
	}
	if len(shards) != 16 {
		t.Errorf("timers of %d shards arrived, want all 16: %v", len(shards), shards)
	}
	if !strings.Contains(doomed.logText(), "worker started") {
		t.Errorf("the killed replica never started; log:\n%s", doomed.logText())
	}
}
