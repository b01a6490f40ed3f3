package poller_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// TestReadmeNamesExistingPollerAPI: every poller.Name the README (and the
// docs) mention is an exported name of this package; it once named
// poller.Run, a method of *Poller.
func TestReadmeNamesExistingPollerAPI(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	add := func(id *ast.Ident) {
		if id.IsExported() {
			exported[id.Name] = true
		}
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		// The package's own names: functions (not methods), types,
		// constants and variables.
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					add(d.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						add(s.Name)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n)
						}
					}
				}
			}
		}
	}
	re := regexp.MustCompile(`\bpoller\.([A-Z][A-Za-z0-9]*)`)
	for _, path := range []string{"../README.md", "../docs/worker.md", "../docs/operations.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if !exported[m[1]] {
				t.Errorf("%s names poller.%s, which package poller does not export", path, m[1])
			}
		}
	}
}

// TestClaimBatchSizeCountsEmptyClaims: the help of timerq_claim_batch_size
// says what it observes, a claim that fired nothing included, which is
// what TimerqNoWorkerClaiming relies on.
func TestClaimBatchSizeCountsEmptyClaims(t *testing.T) {
	m := poller.NewMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	m.Hooks().Claimed(queue.ClaimResult{})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got *dto.MetricFamily
	for _, mf := range mfs {
		if mf.GetName() == "timerq_claim_batch_size" {
			got = mf
		}
	}
	if got == nil || got.Metric[0].GetHistogram().GetSampleCount() != 1 {
		t.Fatalf("timerq_claim_batch_size after one empty claim: %v; want a count of 1", got)
	}
	if h := got.GetHelp(); !strings.Contains(h, "0 for a claim that found nothing due") || !strings.Contains(h, "each successful claim of one shard") {
		t.Fatalf("help %q does not say that empty claims of each shard count", h)
	}
}
