package httpexamples

import (
	"regexp"
	"testing"
	"time"
)

// TestPythonExample runs python/timerq_example.py, which uses only the
// standard library, against a real timerworker, and checks each step it
// reports.
func TestPythonExample(t *testing.T) {
	python := requireTool(t, "python3")
	forEachBackend(t, false, func(t *testing.T, b backend) {
		a := startWorker(t, b)
		// -B: no __pycache__ in the tree.
		out := run(t, 2*time.Minute, "python", a.env(b), python, "-B", "timerq_example.py")
		for _, want := range []string{
			`created 'py/order 7': 201 then 200, due \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`,
			`refused: 422 urn:timerq:problem:invalid-due at /due_at`,
			`listed 1 scheduled, one per page: \['py/order 7'\]`,
			`cancelled: state cancelled`,
			`waited: py-soon fired, payload 'hello from python'`,
			`stream: fire py-soon \(shard \d+\), event id set`,
			`(?m)^done$`,
		} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("the Python example's output lacks %q:\n%s", want, out)
			}
		}
	})
}
