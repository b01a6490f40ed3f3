package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/apiserver"
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// received is one request a test receiver got.
type received struct {
	path    string
	timer   string
	attempt int
	due     time.Time
	fired   time.Time
	at      time.Time
	sigErr  error
}

// receiver records every request, verifies its signature with secret and
// answers with answer(path, how many requests this timer had before).
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []received
}

func newReceiver(t *testing.T, secret string, answer func(r *http.Request, before int) int) *receiver {
	key, err := deliver.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		g := received{path: r.URL.Path, timer: r.Header.Get(deliver.HeaderTimerID), at: at,
			sigErr: deliver.Verify(r.Header, body, at, key)}
		g.attempt, _ = strconv.Atoi(r.Header.Get(deliver.HeaderAttempt))
		g.due, _ = time.Parse(time.RFC3339Nano, r.Header.Get(deliver.HeaderDueAt))
		g.fired, _ = time.Parse(time.RFC3339Nano, r.Header.Get(deliver.HeaderFiredAt))
		rc.mu.Lock()
		before := 0
		for _, p := range rc.got {
			if p.timer == g.timer {
				before++
			}
		}
		rc.got = append(rc.got, g)
		rc.mu.Unlock()
		w.WriteHeader(answer(r, before))
	}))
	t.Cleanup(rc.Close)
	return rc
}

// requests returns the requests for timer id, or for every timer if id is "".
func (rc *receiver) requests(id string) []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []received
	for _, g := range rc.got {
		if id == "" || g.timer == id {
			out = append(out, g)
		}
	}
	return out
}

func send(t *testing.T, method, url string, body any) []byte {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, out)
	}
	return out
}

// TestDeliverEndToEnd runs a worker with Deliver (timerworker --deliver
// --deliver-allow 127.0.0.1/32), registers endpoints and schedules timers
// through its HTTP API, and checks what a local receiver gets: every timer
// at least once, none before its due time, every signature valid; 500
// twice then 204 is delivered on the third attempt; 410 and 400 are
// dead-lettered after one attempt; and an endpoint that holds every
// request it gets does not delay the fires of another.
func TestDeliverEndToEnd(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ns := redistest.Namespace(t)
		secret := deliver.GenerateSecret()
		unblock := make(chan struct{})
		var unblockOnce sync.Once
		rc := newReceiver(t, secret, func(r *http.Request, before int) int {
			switch r.URL.Path {
			case "/flaky":
				if before < 2 {
					return http.StatusInternalServerError
				}
			case "/gone":
				return http.StatusGone
			case "/bad":
				return http.StatusBadRequest
			case "/slow":
				select {
				case <-unblock:
				case <-r.Context().Done():
				}
			}
			return http.StatusNoContent
		})
		t.Cleanup(func() { unblockOnce.Do(func() { close(unblock) }) }) // before rc.Close
		cfg := Config{Conn: cliconf.Conn{RedisURL: redisURL(b)}, Namespaces: []string{ns}, MaxPollInterval: 20 * time.Millisecond,
			API:     apiserver.Config{Addr: "127.0.0.1:0"},
			Deliver: DeliverConfig{Enabled: true, Allow: []string{"127.0.0.1/32"}}}
		w := runWorker(t, cfg)
		base := w.url + "/v1/namespaces/" + ns
		for _, name := range []string{"fast", "flaky", "gone", "bad", "slow"} {
			inFlight := 4
			if name == "slow" {
				inFlight = 1
			}
			send(t, "PUT", base+"/endpoints/"+name, map[string]any{
				"url": rc.URL + "/" + name, "secrets": []string{secret}, "timeout": "20s", "max_in_flight": inFlight,
				"retry": map[string]any{"max_attempts": 5, "backoff_base": "10ms", "backoff_cap": "50ms"},
			})
		}
		var timers []map[string]any
		want := map[string]string{} // timer -> endpoint
		add := func(endpoint string, n int) {
			for i := range n {
				id := fmt.Sprintf("%s-%d", endpoint, i)
				want[id] = endpoint
				timers = append(timers, map[string]any{"id": id, "in": "300ms", "payload_text": `{"n":` + strconv.Itoa(i) + `}`,
					"deliver": map[string]any{"endpoint": endpoint}})
			}
		}
		add("slow", 3) // first, so that they are leased first
		add("fast", 20)
		add("flaky", 3)
		add("gone", 1)
		add("bad", 1)
		send(t, "POST", base+"/timers/batch", map[string]any{"timers": timers})

		q, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		deadLetters := func() map[string]string {
			page, err := q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: 100})
			dls := page.DeadLetters
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, d := range dls {
				out[d.Event.ID] = d.Error
			}
			return out
		}
		// Everything but the slow endpoint's fires arrives while the slow
		// endpoint holds the one request it may have.
		redistest.Eventually(t, 30*time.Second, "the fast, flaky, gone and bad endpoints' fires arrive", func() bool {
			for id, ep := range want {
				n := len(rc.requests(id))
				if ep == "flaky" && n < 3 || ep != "slow" && n == 0 {
					return false
				}
			}
			return len(deadLetters()) == 2
		})
		if n := len(rc.requests("slow-0")) + len(rc.requests("slow-1")) + len(rc.requests("slow-2")); n != 1 {
			t.Errorf("the slow endpoint (max_in_flight 1) got %d requests while it held one, want 1", n)
		}
		unblockOnce.Do(func() { close(unblock) })
		redistest.Eventually(t, 30*time.Second, "the slow endpoint's fires arrive once it answers", func() bool {
			for i := range 3 {
				if len(rc.requests(fmt.Sprintf("slow-%d", i))) == 0 {
					return false
				}
			}
			return true
		})

		dls := deadLetters()
		for _, id := range []string{"gone-0", "bad-0"} {
			if n := len(rc.requests(id)); n != 1 {
				t.Errorf("%s: %d requests, want 1 (dead-lettered at once)", id, n)
			}
			if _, ok := dls[id]; !ok {
				t.Errorf("%s is not dead-lettered: %v", id, dls)
			}
		}
		if !strings.Contains(dls["gone-0"], "410") || !strings.Contains(dls["bad-0"], "400") {
			t.Errorf("dead letters do not say the status: %v", dls)
		}
		for i := range 3 {
			id := fmt.Sprintf("flaky-%d", i)
			var attempts []int
			for _, g := range rc.requests(id) {
				attempts = append(attempts, g.attempt)
			}
			if fmt.Sprint(attempts) != "[1 2 3]" {
				t.Errorf("%s: attempts %v, want [1 2 3] (500, 500, 204)", id, attempts)
			}
			if _, ok := dls[id]; ok {
				t.Errorf("%s was dead-lettered though its third attempt succeeded", id)
			}
		}
		// Every attempt is in the timer's attempt log.
		redistest.Eventually(t, 10*time.Second, "the attempt logs are written", func() bool {
			var got []string
			for _, id := range []string{"flaky-0", "gone-0", "bad-0", "fast-0"} {
				log, err := q.Deliveries().Attempts(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				var s []string
				for _, a := range log {
					s = append(s, fmt.Sprintf("%d:%d:%s", a.Attempt, a.Status, a.Outcome))
				}
				got = append(got, strings.Join(s, ","))
			}
			return fmt.Sprint(got) == "[1:500:retry,2:500:retry,3:204:delivered 1:410:dead_letter 1:400:dead_letter 1:204:delivered]"
		})
		all := rc.requests("")
		for _, g := range all {
			if want[g.timer] == "" || "/"+want[g.timer] != g.path {
				t.Errorf("request for timer %q went to %s", g.timer, g.path)
			}
			if g.sigErr != nil {
				t.Errorf("%s attempt %d: %v", g.timer, g.attempt, g.sigErr)
			}
			// Never early: the server fired it at or after its due time,
			// and it was received after both (one host, one clock).
			if g.due.IsZero() || g.fired.Before(g.due) || g.at.Before(g.due) || g.at.Before(g.fired) {
				t.Errorf("%s: due %v, fired %v, received %v: early", g.timer, g.due, g.fired, g.at)
			}
		}
		if len(all) < len(want) {
			t.Errorf("%d requests for %d timers", len(all), len(want))
		}
	})
}

// The --deliver flags are checked before anything starts: a --deliver-*
// flag without --deliver (but --deliver-allow with the API, which uses
// it), an allow entry that is neither a range, an address nor a host.
func TestDeliverConfigRefusals(t *testing.T) {
	for _, c := range []struct {
		cfg  DeliverConfig
		api  bool
		want string // "" for accepted
	}{
		{DeliverConfig{Group: "g"}, false, "--deliver is not"},
		{DeliverConfig{Allow: []string{"10.0.0.0/8"}}, false, "--deliver is not"},
		{DeliverConfig{Allow: []string{"10.0.0.0/8"}}, true, ""},
		{DeliverConfig{Enabled: true, Allow: []string{"10.0.0.0/8,127.0.0.1", "hooks.internal"}}, false, ""},
		{DeliverConfig{Enabled: true, Allow: []string{"not a host"}}, false, "neither a CIDR"},
		{DeliverConfig{Enabled: true, MaxRedirects: 11}, false, "--deliver-max-redirects"},
		{DeliverConfig{Enabled: true, Lease: time.Millisecond}, false, "--deliver-lease"},
		{DeliverConfig{Enabled: true, Group: "a b"}, false, "--deliver-group"},
	} {
		g, err := c.cfg.guard(c.api)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want a usage error about %s", c.cfg, err, c.want)
		}
		if c.cfg.Enabled && c.want == "" {
			if len(g.Allow) != 2 || g.Allow[1].String() != "127.0.0.1/32" || len(g.AllowHosts) != 1 {
				t.Errorf("guard %+v from %v", g, c.cfg.Allow)
			}
		}
	}
}
