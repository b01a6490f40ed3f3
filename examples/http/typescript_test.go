package httpexamples

import (
	"os"
	"path/filepath"
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
// schedule).
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
