package ctl_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
)

// quarantineJSON is the documented JSON of a quarantined record
// (docs/timerctl.md).
type quarantineJSON struct {
	Kind          string  `json:"kind"`
	ID            string  `json:"id"`
	Shard         int     `json:"shard"`
	Reason        string  `json:"reason"`
	DueScore      string  `json:"due_score"`
	QuarantinedAt *string `json:"quarantined_at"`
	Raw           []byte  `json:"raw"`
}

// TestQuarantineThroughTheCLI: with records timerq cannot read planted in
// the namespace, list and export succeed and say so on stderr, the claim
// quarantines the due one, `quarantine list` shows it, an export and
// import carry both records' bytes into the other namespace's quarantine,
// and `quarantine drop` deletes one.
func TestQuarantineThroughTheCLI(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		src := newCLI(t, b)
		src.ok("schedule", "later", "--in", "1h", "--payload", "l")
		src.ok("schedule", "due", "--at", "2020-01-02T03:04:05.678Z", "--payload", "d")
		k := src.q.Keys().Shard(0)
		badRaw := "garbage\x00\xff\n"
		for _, c := range []redis.Cmder{
			b.Client.HSet(ctx, k[1], "bad", badRaw),
			b.Client.ZAdd(ctx, k[0], redis.Z{Score: 1577934245000, Member: "bad"}),
			b.Client.HSet(ctx, k[1], "bad-fired", "f:1:2:"),
			b.Client.ZAdd(ctx, k[2], redis.Z{Score: 1, Member: "bad-fired"}),
		} {
			if c.Err() != nil {
				t.Fatal(c.Err())
			}
		}

		r := src.ok("list")
		if !strings.Contains(r.stdout, "later") || !strings.Contains(r.stdout, "due") || strings.Contains(r.stdout, "bad") {
			t.Errorf("list stdout %q", r.stdout)
		}
		if !strings.Contains(r.stderr, `skipped record "bad" of shard 0`) || !strings.Contains(r.stderr, `"bad-fired"`) {
			t.Errorf("list stderr %q, want a warning for each planted record", r.stderr)
		}
		if r := src.ok("export"); strings.Count(r.stdout, `"kind":"quarantined"`) != 2 || !strings.Contains(r.stderr, "2 records timerq cannot read") {
			t.Errorf("export before the claim: stdout %q stderr %q", r.stdout, r.stderr)
		}

		if f := src.claim(); len(f) != 1 || f[0].ID != "due" {
			t.Fatalf("claim fired %+v, want due", f)
		}
		r = src.ok("quarantine", "list")
		if !strings.Contains(r.stdout, `"bad"`) || !strings.Contains(r.stdout, `"garbage\x00\xff\n"`) || !strings.Contains(r.stdout, "malformed record") {
			t.Errorf("quarantine list: %q", r.stdout)
		}
		qs := decode[[]quarantineJSON](t, src.ok("-o", "json", "quarantine", "list").stdout)
		if len(qs) != 1 || qs[0].ID != "bad" || string(qs[0].Raw) != badRaw || qs[0].QuarantinedAt == nil || qs[0].DueScore != "1577934245000" {
			t.Fatalf("quarantine list -o json: %+v", qs)
		}

		exp := src.ok("export").stdout
		dst := newCLI(t, b)
		r = dst.runCtx(ctx, exp, "import")
		if r.code != 0 || !strings.Contains(r.stdout, "created 2, existing 0, rejected 0") || !strings.Contains(r.stdout, "2 records put in the quarantine") {
			t.Fatalf("import: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		lines := func(s string) []string {
			l := strings.Split(strings.TrimSpace(s), "\n")
			slices.Sort(l)
			return l
		}
		// The copy exports the same lines: the quarantine kept every byte.
		if again := dst.ok("export").stdout; !slices.Equal(lines(again), lines(exp)) {
			t.Errorf("the copy exports\n%s\nthe source\n%s", again, exp)
		}
		if f := dst.claim(); len(f) != 0 {
			t.Errorf("the copy fired %+v", f)
		}

		src.ok("quarantine", "drop", "bad")
		if r := src.run("quarantine", "drop", "bad"); r.code != 3 || !strings.Contains(r.stderr, `no quarantined record "bad"`) {
			t.Errorf("second drop: exit %d %q", r.code, r.stderr)
		}
		if r := src.ok("quarantine", "list"); !strings.Contains(r.stdout, "no quarantined records") {
			t.Errorf("after the drop: %q", r.stdout)
		}
	})
}
