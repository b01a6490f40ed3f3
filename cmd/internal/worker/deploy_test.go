package worker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// exportedMetrics lists every timerq_* series name a worker serving two
// namespaces exports (histograms with their _bucket, _count and _sum), and
// which of them are the process's rather than a namespace's (no namespace
// label: the Redis pool, which the namespaces share).
func exportedMetrics(t *testing.T) (names []string, perProcess map[string]bool) {
	t.Helper()
	_, rdb := redistest.Mini(t)
	var qs []*queue.Queue
	var ms []*poller.Metrics
	for _, ns := range []string{"deploy", "other"} {
		q, err := queue.New(rdb, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		// A group, so the per-group gauges have a series.
		if err := rdb.XGroupCreateMkStream(context.Background(), q.Keys().Stream(0), "g", "0").Err(); err != nil {
			t.Fatal(err)
		}
		qs, ms = append(qs, q), append(ms, poller.NewMetrics())
	}
	// A heartbeat, so the last-seen gauge has a series.
	if _, err := qs[0].Engine().Heartbeat(context.Background(), "w1", time.Minute, false); err != nil {
		t.Fatal(err)
	}
	// A --deliver worker's delivery metrics, with an attempt of each
	// outcome, so every series exists.
	var dms []*dispatch.Metrics
	for range qs {
		dm := dispatch.NewMetrics(func() int { return 0 })
		for _, o := range []deliver.Outcome{deliver.Delivered, deliver.Retry, deliver.DeadLetter} {
			dm.Observe(dispatch.Report{Event: queue.Event{Due: time.Now()}, Endpoint: "billing",
				Attempt: deliver.Attempt{At: time.Now(), Decision: deliver.Decision{Outcome: o, Reason: deliver.ReasonServerError}}})
		}
		dms = append(dms, dm)
	}
	reg := prometheus.NewRegistry()
	all := make([]served, len(qs))
	for i, q := range qs {
		all[i] = served{q: q, m: ms[i], dm: dms[i]}
	}
	if err := registerAll(reg, rdb, all, "test"); err != nil {
		t.Fatal(err)
	}
	// One read of the due horizon, which serve would run.
	for _, s := range all {
		if err := s.horizon.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	perProcess = map[string]bool{}
	for _, mf := range mfs {
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			names = append(names, mf.GetName()+"_bucket", mf.GetName()+"_count", mf.GetName()+"_sum")
			continue
		}
		names = append(names, mf.GetName())
		process := strings.HasPrefix(mf.GetName(), "timerq_redis_pool_")
		if process {
			perProcess[mf.GetName()] = true
			if n := len(mf.GetMetric()); n != 1 {
				t.Errorf("%s has %d series for one process's one pool: the namespaces repeat it", mf.GetName(), n)
			}
		}
		for _, m := range mf.GetMetric() {
			labelled := slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "namespace" })
			if labelled == process {
				t.Errorf("%s: namespace label %v, want %v", mf.GetName(), labelled, !process)
			}
		}
	}
	return names, perProcess
}

var metricName = regexp.MustCompile(`timerq_[a-z_]+`)

// TestDeployReferencesExportedMetrics: the Grafana dashboard and the alert
// rules query only metrics the worker exports, every alert has a runbook
// section in docs/operations.md, and the dashboard has the panels operators
// look for. promtool (in .ci/run) checks the rules' syntax and behaviour.
func TestDeployReferencesExportedMetrics(t *testing.T) {
	names, perProcess := exportedMetrics(t)
	root := filepath.Join("..", "..", "..")
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "timerq.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/timerq.json is not JSON: %v", err)
	}
	var titles []string
	for _, p := range dash.Panels {
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				if !slices.Contains(names, m) {
					t.Errorf("panel %q queries %s, which no worker exports", p.Title, m)
				}
			}
			for m := range perProcess {
				if regexp.MustCompile(m + `\{[^}]*namespace`).MatchString(tg.Expr) {
					t.Errorf("panel %q selects %s by namespace, a label it does not have: %s", p.Title, m, tg.Expr)
				}
			}
		}
	}
	all := strings.ToLower(strings.Join(titles, "|"))
	for _, want := range []string{"fire rate", "lateness (heatmap)", "backlog", "claim errors", "redis connection pool"} {
		if !strings.Contains(all, want) {
			t.Errorf("dashboard lacks a %q panel: %v", want, titles)
		}
	}

	rules, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "timerq-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metricName.FindAllString(string(rules), -1) {
		if !slices.Contains(names, m) {
			t.Errorf("alert rules query %s, which no worker exports", m)
		}
	}
	for m := range perProcess {
		if regexp.MustCompile(m + `\{[^}]*namespace`).MatchString(string(rules)) {
			t.Errorf("alert rules select %s by namespace, a label it does not have", m)
		}
	}
	ops, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 4 {
		t.Fatalf("found %d alerts in the rules", len(alerts))
	}
	for _, a := range alerts {
		if !strings.Contains(string(ops), "\n### "+a[1]+"\n") {
			t.Errorf("docs/operations.md has no runbook section \"### %s\"", a[1])
		}
	}
}
