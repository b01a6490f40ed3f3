package httpexamples

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// tsDir is the TypeScript example.
const tsDir = "typescript"

var (
	tsOnce sync.Once
	tsErr  error
)

// buildTypeScript installs the example's pinned packages if node_modules
// is missing (CI's .ci/run runs npm ci first), generates the client's
// types from api/openapi.json and type-checks and compiles the test with
// tsc. It runs once per test binary.
func buildTypeScript(t *testing.T) {
	t.Helper()
	npm := requireTool(t, "npm")
	requireTool(t, "node")
	tsOnce.Do(func() {
		steps := [][]string{
			// Types from the document as it is now: a route or field the
			// test uses that the document lost fails tsc.
			{"run", "-s", "generate"},
			{"run", "-s", "build"},
		}
		if _, err := os.Stat(filepath.Join(tsDir, "node_modules")); err != nil {
			steps = append([][]string{{"ci", "--no-audit", "--no-fund"}}, steps...)
		}
		for _, args := range steps {
			if _, tsErr = runErr(5*time.Minute, tsDir, os.Environ(), npm, args...); tsErr != nil {
				return
			}
		}
	})
	if tsErr != nil {
		t.Fatal(tsErr)
	}
}

// TestTypeScriptClient runs typescript/test with node --test against a
// real timerworker on standalone Redis, Sentinel and a 16-shard Cluster
// namespace: every route of api/openapi.json through the generated
// client (create and idempotent re-create, batch, get, list with paging,
// reschedule, fire, cancel, wait, SSE with Last-Event-ID, a recurring
// schedule, and pull-consume: lease, extend, ack, release with a retry, a
// dead letter after max_attempts and its requeue).
func TestTypeScriptClient(t *testing.T) {
	buildTypeScript(t)
	node := requireTool(t, "node")
	forEachBackend(t, true, func(t *testing.T, b backend) {
		a := startWorker(t, b)
		out := run(t, 3*time.Minute, tsDir, a.env(b), node, "--test", "--test-reporter=spec", "out/test/")
		// node --test ends with counts; a run that found no test passes.
		if !strings.Contains(out, "ℹ pass ") || strings.Contains(out, "ℹ pass 0\n") {
			t.Fatalf("node --test ran no test:\n%s", out)
		}
		t.Logf("node --test:\n%s", out)
	})
}

// TestTypeScriptClientCoversEveryRoute: every operation of api/openapi.json
// is called through the generated client in typescript/test, so a route
// added to the contract (the pull-consume routes under groups/, say) is
// not done until the TypeScript client exercises it. It needs no Node.
func TestTypeScriptClientCoversEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("../../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(tsDir, "test", "*.ts"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no TypeScript tests in %s/test: %v", tsDir, err)
	}
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	n := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			m := strings.ToUpper(method)
			switch m {
			case "GET", "PUT", "POST", "DELETE", "PATCH", "HEAD":
			default:
				continue // parameters, summary, …
			}
			n++
			// openapi-fetch's call: client.POST("/v1/…", …).
			if !regexp.MustCompile(`\.` + m + `\(\s*"` + regexp.QuoteMeta(path) + `"`).MatchString(src.String()) {
				t.Errorf("%s %s is in api/openapi.json but no test in %s/test calls it through the generated client (.%s(%q, …))", m, path, tsDir, m, path)
			}
		}
	}
	if n < 19 {
		t.Fatalf("found %d operations in api/openapi.json, want at least the 19 of docs/api.md", n)
	}
}
