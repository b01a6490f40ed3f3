package ctl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/cmd/internal/ctl"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestScheduleOwnerLabelsAndEpoch: schedule --owner, --label (a comma is
// part of a value), --fire-within and --epoch set a timer's owner, labels,
// deadline and expected epoch; get shows them, in a table and as the
// API's JSON; list --owner and --label select by them, and the next
// page's command keeps them; owner get and bump read and raise the epoch,
// a schedule under a stale epoch is exit 4 and writes nothing, and bump
// --cancel-older cancels the older timers.
func TestScheduleOwnerLabelsAndEpoch(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		const owner = "wf/1 x"
		labels := map[string]string{"tenant": "acme,inc", "kind": "sla"}
		j := decode[api.TimerJSON](t, c.ok("-o", "json", "schedule", "a1", "--in", "1h", "--owner", owner,
			"--label", "tenant=acme,inc", "--label", "kind=sla", "--fire-within", "10m").stdout)
		due, err := time.Parse(time.RFC3339Nano, j.DueAt)
		if err != nil {
			t.Fatal(err)
		}
		if j.Owner != owner || j.Epoch == nil || *j.Epoch != 0 || !maps.Equal(j.Labels, labels) || j.Deadline == nil ||
			*j.Deadline != due.Add(10*time.Minute).Format("2006-01-02T15:04:05.000Z07:00") {
			t.Fatalf("schedule with an owner, labels and a deadline: %+v", j)
		}
		out := c.ok("get", "a1").stdout
		for _, want := range []string{"owner     wf/1 x", "epoch     0", `labels    kind="sla" tenant="acme,inc"`, "deadline  "} {
			if !strings.Contains(out, want) {
				t.Errorf("get's table lacks %q:\n%s", want, out)
			}
		}
		c.ok("schedule", "a2", "--in", "2h", "--owner", owner, "--label", "kind=sla")
		c.ok("schedule", "plain", "--in", "1h")
		if out := c.ok("get", "plain").stdout; strings.Contains(out, "owner") || strings.Contains(out, "epoch") {
			t.Errorf("a timer without an owner shows one:\n%s", out)
		}
		listIDs := func(args ...string) string {
			t.Helper()
			var ids []string
			for _, tm := range decode[[]api.TimerJSON](t, c.ok(append([]string{"-o", "json", "list"}, args...)...).stdout) {
				ids = append(ids, tm.ID)
			}
			return fmt.Sprint(ids)
		}
		for args, want := range map[string]string{
			"--owner|" + owner:                         "[a1 a2]",
			"--label|tenant=acme,inc":                  "[a1]",
			"--owner|" + owner + "|--label|kind=sla":   "[a1 a2]",
			"--label|kind=sla|--label|tenant=acme,inc": "[a1]",
			"--label|kind=other":                       "[]",
		} {
			if got := listIDs(strings.Split(args, "|")...); got != want {
				t.Errorf("list %s: %s, want %s", args, got, want)
			}
		}
		// The table shows owners and epochs when any timer has one.
		if out := c.ok("list").stdout; !regexp.MustCompile(`(?m)^ID\s+STATE\s+DUE\s+OWNER\s+EPOCH\s+PAYLOAD$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^a1\s+scheduled\s+.+\s+wf/1 x\s+0\s+-$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^plain\s+scheduled\s+.+\s+-\s+-\s+-$`).MatchString(out) {
			t.Errorf("list's table lacks the owners:\n%s", out)
		}
		if out := c.ok("list", "--label", "kind=other").stdout; strings.Contains(out, "OWNER") {
			t.Errorf("list's table of no owned timer has an OWNER column:\n%s", out)
		}
		if out := c.ok("list", "--owner", owner, "--label", "kind=sla", "--limit", "1").stdout; !strings.Contains(out, "--owner 'wf/1 x' --label kind=sla --limit 1 --cursor ") {
			t.Errorf("list's next page command drops the filters:\n%s", out)
		}

		st := decode[api.OwnerJSON](t, c.ok("-o", "json", "owner", "get", owner).stdout)
		if st.Owner != owner || st.Epoch != 0 || st.Scheduled != 2 || st.NextWakeAt == nil || *st.NextWakeAt != j.DueAt {
			t.Fatalf("owner get: %+v, want epoch 0, 2 scheduled, next wake %s", st, j.DueAt)
		}
		if out := c.ok("owner", "get", owner).stdout; !strings.Contains(out, "scheduled  2") || !strings.Contains(out, "next wake  ") {
			t.Errorf("owner get's table:\n%s", out)
		}
		bumped := decode[api.BumpedJSON](t, c.ok("-o", "json", "owner", "bump", owner).stdout)
		if bumped.Epoch != 1 || bumped.CancelJob != nil {
			t.Fatalf("owner bump: %+v", bumped)
		}
		r := c.run("schedule", "stale", "--in", "1h", "--owner", owner, "--epoch", "7")
		if r.code != ctl.ExitConflict || !strings.Contains(r.stderr, "is at epoch 1") || !strings.Contains(r.stderr, "timerctl owner bump") {
			t.Fatalf("schedule under a stale epoch: exit %d %q, want %d", r.code, r.stderr, ctl.ExitConflict)
		}
		if _, err := c.q.Get(context.Background(), "stale"); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("a schedule under a stale epoch wrote its timer: %v", err)
		}
		if got := decode[api.TimerJSON](t, c.ok("-o", "json", "schedule", "a3", "--in", "1h", "--owner", owner, "--epoch", "1").stdout); *got.Epoch != 1 {
			t.Fatalf("schedule under the current epoch: %+v", got)
		}
		bumped = decode[api.BumpedJSON](t, c.ok("-o", "json", "owner", "bump", owner, "--cancel-older").stdout)
		if job := bumped.CancelJob; bumped.Epoch != 2 || job == nil || job.Counts.Cancelled != 3 || job.Filter.Owner != owner || job.Filter.EpochBelow != 2 {
			t.Fatalf("owner bump --cancel-older: %+v", bumped)
		}
		if out := c.ok("owner", "bump", owner, "--cancel-older").stdout; !strings.Contains(out, "at epoch 3") || !strings.Contains(out, "epoch below       3") {
			t.Errorf("owner bump --cancel-older's table:\n%s", out)
		}
		if tm, err := c.q.Get(context.Background(), "plain"); err != nil || tm.State != queue.StateScheduled {
			t.Fatalf("a timer of no owner: %+v %v, want it left scheduled", tm, err)
		}
		// A recurring schedule takes the owner and labels for each occurrence.
		c.ok("schedule", "tick", "--every", "1h", "--owner", "wf-r", "--label", "k=v,w")
		if info, err := c.q.Recurring().Get(context.Background(), "tick"); err != nil || info.Owner != "wf-r" || info.Labels["k"] != "v,w" {
			t.Fatalf("schedule --every --owner --label: %+v %v", info.Recurring, err)
		}
	})
}

// TestCancelByOwnerAndLabels: cancel --owner and --label (with --prefix
// too) cancel the timers selected, and the job shows its filter.
func TestCancelByOwnerAndLabels(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		for i := range 6 {
			c.ok("schedule", fmt.Sprintf("p%d-%d", i%2, i), "--in", "1h", "--owner", []string{"a", "b", "c"}[i%3],
				"--label", "parity="+fmt.Sprint(i%2), "--label", "note=x,y")
		}
		for _, tc := range []struct {
			args      []string
			cancelled int64
		}{
			{[]string{"--owner", "a", "--prefix", "p0-"}, 1},            // i = 0
			{[]string{"--owner", "b", "--label", "parity=1"}, 1},        // i = 1
			{[]string{"--label", "note=x,y", "--label", "parity=0"}, 2}, // i = 2, 4
		} {
			j := decode[api.CancelJobJSON](t, c.ok(append([]string{"-o", "json", "cancel"}, tc.args...)...).stdout)
			if j.State != "done" || j.Counts.Cancelled != tc.cancelled {
				t.Errorf("cancel %q: %+v, want %d cancelled", tc.args, j, tc.cancelled)
			}
		}
		out := c.ok("cancel", "--owner", "c").stdout // i = 5 left
		if !strings.Contains(out, `owner             "c"`) || !strings.Contains(out, "cancelled         1") {
			t.Errorf("cancel --owner's table:\n%s", out)
		}
		if out := c.ok("cancel-jobs", "list").stdout; !strings.Contains(out, `labels note="x,y" parity="0"`) || !strings.Contains(out, `owner "a", prefix`) && !strings.Contains(out, `prefix "p0-", owner "a"`) {
			t.Errorf("cancel-jobs list's filters:\n%s", out)
		}
	})
}

// TestOwnerFlagsMisuse: what queue would refuse, and flags that do not
// go together, are usage errors (exit 2) that say what to do and write
// nothing.
func TestOwnerFlagsMisuse(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"schedule", "a", "--in", "1h", "--epoch", "1"}, "--epoch needs --owner"},
			{[]string{"schedule", "a", "--in", "1h", "--owner", ""}, "the owner is empty"},
			{[]string{"schedule", "a", "--in", "1h", "--owner", "a\x01b"}, "control character"},
			{[]string{"schedule", "a", "--in", "1h", "--label", "tenant"}, `--label "tenant" is not KEY=VALUE`},
			{[]string{"schedule", "a", "--in", "1h", "--label", "a b=1"}, `label key "a b"`},
			{[]string{"schedule", "a", "--in", "1h", "--label", "k=1", "--label", "k=2"}, "--label k is given twice"},
			{[]string{"schedule", "a", "--in", "1h", "--fire-within", "0s"}, "--fire-within \"0s\" is not positive"},
			{[]string{"schedule", "a", "--in", "1h", "--fire-within", "soon"}, "is not a duration"},
			{[]string{"schedule", "a", "--in", "1h", "--owner", "o", "--epoch", "-1"}, "epoch"},
			{[]string{"schedule", "r", "--every", "1h", "--owner", "o", "--epoch", "1"}, "a one-shot timer's"},
			{[]string{"list", "--owner", ""}, "the owner is empty"},
			{[]string{"list", "--label", "x"}, "not KEY=VALUE"},
			{[]string{"cancel", "a", "--owner", "o"}, "an ID or a filter"},
			{[]string{"cancel", "--prefix", "", "--owner", "o"}, "--prefix is empty"}, // not every ID of o
			{[]string{"cancel", "--label", "k"}, "not KEY=VALUE"},
			{[]string{"owner", "get"}, "takes one owner"},
			{[]string{"owner", "get", "o", "--cancel-older"}, "--cancel-older is bump's"},
			{[]string{"owner", "bump", "a\x01b"}, "control character"},
			{[]string{"owner", "drop", "o"}, "owner takes get or bump"},
		} {
			r := c.run(tc.args...)
			if r.code != ctl.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, ": ") < 2 {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d saying %q and what to do", tc.args, r.code, r.stdout, r.stderr, ctl.ExitUsage, tc.want)
			}
		}
		if keys := c.keys(); len(keys) != 0 {
			t.Fatalf("refused commands wrote keys: %v", keys)
		}
	})
}

// TestExportImportKeepsOwnersLabelsEpochsAndDeadlines: export writes a
// timer's owner, epoch, labels and deadline, in every state, and import
// restores them as they were, into a namespace of 4 shards too; there the
// owner's epoch is at least its timers', on every shard, so a bump goes
// past them and timers scheduled under the bumped epoch are taken on each
// shard. A new timer's line takes an owner, labels, epoch and deadline
// as the API's create does.
func TestExportImportKeepsOwnersLabelsEpochsAndDeadlines(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		src := newCLI(t, b)
		// The timers of epoch 2 are off the first shard of the 4-shard
		// target, whose epoch Epoch reads and BumpEpoch bumps from.
		offFirst := func(prefix string) string {
			for i := 0; ; i++ {
				if id := fmt.Sprint(prefix, i); keyspace.ShardOf(id, 4) != 0 {
					return id
				}
			}
		}
		e2, fired := offFirst("o-e2-"), offFirst("o-fired-")
		src.ok("schedule", "o-sched", "--in", "2h", "--owner", "wf", "--label", "tenant=acme", "--fire-within", "10m")
		src.ok("owner", "bump", "wf")
		src.ok("owner", "bump", "wf")
		src.ok("schedule", e2, "--in", "3h", "--owner", "wf", "--epoch", "2", "--label", "k=v,w")
		src.ok("schedule", fired, "--at", "2020-01-02T03:04:05.678Z", "--owner", "wf", "--epoch", "2", "--label", "x=y")
		src.ok("schedule", "o-cancelled", "--in", "1h", "--owner", "other", "--fire-within", "1m")
		src.ok("schedule", "plain", "--in", "1h")
		if f := src.claim(); len(f) != 1 || f[0].ID != fired {
			t.Fatalf("claim fired %+v", f)
		}
		src.ok("cancel", "o-cancelled")
		ids := []string{"o-sched", e2, fired, "o-cancelled", "plain"}

		exp := src.ok("export").stdout
		byID := map[string]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(exp), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			byID[m["id"].(string)] = m
		}
		for id, want := range map[string]string{
			"o-sched":     "owner wf epoch 0 labels map[tenant:acme] deadline true",
			e2:            "owner wf epoch 2 labels map[k:v,w] deadline false",
			fired:         "owner wf epoch 2 labels map[x:y] deadline false",
			"o-cancelled": "owner other epoch 0 labels <nil> deadline true",
			"plain":       "owner <nil> epoch <nil> labels <nil> deadline false",
		} {
			m := byID[id]
			_, deadline := m["deadline"]
			if got := fmt.Sprintf("owner %v epoch %v labels %v deadline %v", m["owner"], m["epoch"], m["labels"], deadline); got != want {
				t.Errorf("export line of %s: %s, want %s", id, got, want)
			}
		}

		dst := newCLI(t, b)
		if _, err := queue.CreateNamespace(ctx, b.Client, dst.ns, 4); err != nil {
			t.Fatal(err)
		}
		if r := dst.runCtx(ctx, exp, "import"); r.code != 0 || !strings.Contains(r.stdout, "created 5, existing 0, rejected 0") {
			t.Fatalf("import: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		for _, id := range ids {
			x := src.ok("-o", "json", "get", id).stdout
			if y := dst.ok("-o", "json", "get", id).stdout; x != y {
				t.Errorf("%s exported:\n%s re-imported:\n%s", id, x, y)
			}
		}
		lines := func(s string) []string {
			return slices.Sorted(slices.Values(strings.Split(strings.TrimSpace(s), "\n")))
		}
		if again := dst.ok("export").stdout; !slices.Equal(lines(again), lines(exp)) {
			t.Errorf("the copy exports\n%s\nwas\n%s", again, exp)
		}
		if f := dst.claim(); len(f) != 0 {
			t.Fatalf("claim after the import fired %+v", f)
		}

		// The owner's epoch came along: at least its timers', on every shard.
		if st := decode[api.OwnerJSON](t, dst.ok("-o", "json", "owner", "get", "wf").stdout); st.Epoch < 2 || st.Scheduled != 2 {
			t.Fatalf("owner wf after the import: %+v, want epoch 2 or more and 2 scheduled", st)
		}
		bumped := decode[api.BumpedJSON](t, dst.ok("-o", "json", "owner", "bump", "wf").stdout)
		if bumped.Epoch <= 2 {
			t.Fatalf("bump after the import: %+v, want past 2", bumped)
		}
		var in strings.Builder
		for i := range 12 {
			fmt.Fprintf(&in, `{"id":"new-%d","in":"1h","owner":"wf","epoch":%d,"labels":{"a":"b"},"fire_within_ms":60000}`+"\n", i, bumped.Epoch)
		}
		if r := dst.runCtx(ctx, in.String(), "import"); r.code != 0 || !strings.Contains(r.stdout, "created 12,") {
			t.Fatalf("import of new timers under the bumped epoch %d: exit %d %q %q", bumped.Epoch, r.code, r.stdout, r.stderr)
		}
		tm, err := dst.q.Get(ctx, "new-0")
		if err != nil || tm.Owner != "wf" || tm.Epoch != bumped.Epoch || tm.Labels["a"] != "b" || !tm.Deadline.Equal(tm.Due.Truncate(time.Millisecond).Add(time.Minute)) {
			t.Fatalf("a new timer's line: %+v %v", tm, err)
		}
		r := dst.runCtx(ctx, `{"id":"zombie","in":"1h","owner":"wf","epoch":1}`+"\n", "import")
		if r.code != ctl.ExitConflict || !strings.Contains(r.stderr, "stale owner epoch") {
			t.Fatalf("import under a stale epoch: exit %d %q %q, want %d", r.code, r.stdout, r.stderr, ctl.ExitConflict)
		}
	})
}
