package ctl_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

type endpointOut struct {
	Name        string            `json:"name"`
	URL         string            `json:"url"`
	Headers     map[string]string `json:"headers"`
	Timeout     string            `json:"timeout"`
	Retry       map[string]any    `json:"retry"`
	MaxInFlight int               `json:"max_in_flight"`
	Secrets     []string          `json:"secrets"`
	Enabled     bool              `json:"enabled"`
	UpdatedAt   string            `json:"updated_at"`
	Created     *bool             `json:"created"`
}

func secretFile(t *testing.T, keys ...byte) (path string, secrets []string) {
	t.Helper()
	for _, k := range keys {
		secrets = append(secrets, "whsec_"+base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(k), 32))))
	}
	path = filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(path, []byte(strings.Join(secrets, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, secrets
}

// TestEndpointsCommands creates, reads, lists, disables, enables and
// deletes an endpoint, never printing a secret whole, and schedules a timer
// that delivers to it.
func TestEndpointsCommands(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		file, secrets := secretFile(t, 'a', 'b')
		noSecret := func(r result) {
			t.Helper()
			for _, s := range secrets {
				if strings.Contains(r.stdout+r.stderr, s[6:18]) {
					t.Fatalf("output shows a secret: %s%s", r.stdout, r.stderr)
				}
			}
			// A header value is shown as its fingerprint only, like a secret.
			if strings.Contains(r.stdout+r.stderr, "Bearer x") {
				t.Fatalf("output shows a header value: %s%s", r.stdout, r.stderr)
			}
		}
		r := c.ok("endpoints", "create", "billing", "--url", "https://billing.example.com/hooks", "--secret-file", file,
			"--header", "Authorization: Bearer x", "--max-attempts", "5", "--backoff-base", "2s", "-o", "json")
		noSecret(r)
		e := decode[endpointOut](t, r.stdout)
		if e.Name != "billing" || !*e.Created || len(e.Secrets) != 2 || e.Headers["Authorization"] != queue.RedactHeader("Bearer x") || e.Retry["max_attempts"] != 5.0 || !e.Enabled {
			t.Fatalf("create -o json = %+v", e)
		}
		stored, err := c.q.Endpoints().Get(context.Background(), "billing")
		if err != nil || stored.Secrets[0].Reveal() != secrets[0] || stored.Retry.Base.String() != "2s" {
			t.Fatalf("stored = %+v, %v", stored, err)
		}
		r = c.ok("endpoints", "create", "billing", "--url", "https://billing.example.com/v2", "--secret-file", file, "--header", "Authorization: Bearer x")
		noSecret(r)
		if !strings.Contains(r.stdout, "billing (replaced)") || !strings.Contains(r.stdout, "https://billing.example.com/v2") {
			t.Fatalf("replace = %s", r.stdout)
		}
		r = c.ok("endpoints", "get", "billing")
		noSecret(r)
		if !strings.Contains(r.stdout, "whsec_") || !strings.Contains(r.stdout, "enabled") ||
			!strings.Contains(r.stdout, "Authorization: "+queue.RedactHeader("Bearer x")) {
			t.Fatalf("get = %s", r.stdout)
		}
		r = c.ok("endpoints", "get", "billing", "-o", "json")
		noSecret(r)
		if h := decode[endpointOut](t, r.stdout).Headers; h["Authorization"] != queue.RedactHeader("Bearer x") {
			t.Fatalf("get -o json headers = %v", h)
		}
		r = c.ok("endpoints", "list", "-o", "json")
		noSecret(r)
		if r := c.ok("endpoints", "disable", "billing", "-o", "json"); decode[endpointOut](t, r.stdout).Enabled {
			t.Fatalf("disable = %s", r.stdout)
		}
		if r := c.ok("endpoints", "enable", "billing", "-o", "json"); !decode[endpointOut](t, r.stdout).Enabled {
			t.Fatalf("enable = %s", r.stdout)
		}
		r = c.ok("endpoints", "list")
		noSecret(r)
		if !strings.Contains(r.stdout, "NAME") || !strings.Contains(r.stdout, "billing") {
			t.Fatalf("list = %s", r.stdout)
		}

		// A timer that delivers, then one to a missing endpoint.
		c.ok("schedule", "t1", "--in", "0s", "--deliver", "billing", "-p", "{}")
		r = c.run("schedule", "t2", "--in", "1h", "--deliver", "nope")
		if r.code != ctl.ExitNotFound || !strings.Contains(r.stderr, `"nope"`) || !strings.Contains(r.stderr, "timerctl endpoints list") {
			t.Fatalf("schedule --deliver nope: exit %d, stderr %q", r.code, r.stderr)
		}
		if r := c.run("get", "t2"); r.code != ctl.ExitNotFound {
			t.Fatalf("the refused timer exists: %d %s", r.code, r.stdout)
		}
		// A recurring schedule delivers its occurrences.
		r = c.ok("schedule", "tick", "--every", "1h", "--deliver", "billing", "-o", "json")
		var sched struct {
			Deliver *struct{ Endpoint string } `json:"deliver"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &sched); err != nil || sched.Deliver == nil || sched.Deliver.Endpoint != "billing" {
			t.Fatalf("schedule --every --deliver = %s (%v)", r.stdout, err)
		}
		if r := c.run("schedule", "tock", "--every", "1h", "--deliver", "nope"); r.code != ctl.ExitNotFound || !strings.Contains(r.stderr, `"nope"`) {
			t.Fatalf("schedule --every --deliver nope: exit %d, stderr %q", r.code, r.stderr)
		}
		if r := c.run("schedules", "get", "tock"); r.code != ctl.ExitNotFound {
			t.Fatalf("the refused schedule exists: %d %s", r.code, r.stdout)
		}
		c.ok("schedules", "delete", "tick")
		redistest.Eventually(t, 10*time.Second, "t1 fires", func() bool { return len(c.claim()) == 1 })
		evs, _, err := c.q.Inspect().RecentFires(context.Background(), 10)
		if err != nil || len(evs) != 1 || evs[0].Endpoint != "billing" {
			t.Fatalf("fire events = %+v, %v", evs, err)
		}

		if r := c.ok("endpoints", "delete", "billing"); !strings.Contains(r.stdout, "deleted endpoint billing") {
			t.Fatalf("delete = %s", r.stdout)
		}
		for _, verb := range []string{"get", "delete", "enable", "disable"} {
			r := c.run("endpoints", verb, "billing")
			if r.code != ctl.ExitNotFound || !strings.Contains(r.stderr, "endpoint not found") {
				t.Errorf("%s after delete: exit %d, stderr %q", verb, r.code, r.stderr)
			}
		}
	})
}

// Each bad endpoint is refused as a usage error, on one line saying what to
// do, and nothing is written.
func TestEndpointsBadInputWritesNothing(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		file, _ := secretFile(t, 'a')
		short := filepath.Join(t.TempDir(), "short")
		if err := os.WriteFile(short, []byte("whsec_"+base64.StdEncoding.EncodeToString([]byte("too short"))+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		create := func(url string, more ...string) []string {
			return append([]string{"endpoints", "create", "billing", "--url", url}, more...)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{create("ftp://example.com/", "--secret-file", file), `URL scheme "ftp"`},
			{create("https://u:p@example.com/", "--secret-file", file), "user information"},
			{create("http://127.0.0.1:8080/", "--secret-file", file), "--allow CIDR"},
			{create("http://10.0.0.7/", "--secret-file", file), "10.0.0.0/8"},
			{create("https://example.com/", "--secret-file", short), "9 bytes"},
			{create("https://example.com/"), "needs --secret-file"},
			{create("https://example.com/", "--secret-file", "/does/not/exist"), "--secret-file"},
			{create("https://example.com/", "--secret-file", file, "--header", "NoColon"), "is not NAME: VALUE"},
			{create("https://example.com/", "--secret-file", file, "--header", "webhook-id: x"), "set by the delivery"},
			{create("https://example.com/", "--secret-file", file, "--allow", "nonsense"), "is not a CIDR"},
			{[]string{"endpoints", "create", "bad name", "--url", "https://example.com/", "--secret-file", file}, "name"},
			{[]string{"endpoints", "create", "billing", "--secret-file", file}, "needs --url"},
			{[]string{"endpoints", "frob"}, `not "frob"`},
			{[]string{"endpoints", "get"}, "takes one endpoint name"},
			{[]string{"schedule", "t", "--in", "1m", "--deliver", "bad name"}, "name"},
			{[]string{"schedule", "s", "--every", "1m", "--deliver", "bad name"}, "name"},
		} {
			r := c.run(tc.args...)
			if r.code != ctl.ExitUsage || !strings.HasPrefix(r.stderr, "timerctl: ") || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%q: exit %d, stderr %q; want %d, one line with %q", tc.args, r.code, r.stderr, ctl.ExitUsage, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("%q: wrote to stdout: %q", tc.args, r.stdout)
			}
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("bad input wrote keys: %v", keys)
		}
		// The operator's --allow admits a private address.
		c.ok("endpoints", "create", "local", "--url", "http://127.0.0.1:8080/", "--secret-file", file, "--allow", "127.0.0.1")
	})
}
