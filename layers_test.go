package timerq_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// A floor is where a package of the module sits (docs/development.md,
// "Floors"). A package imports only packages on its own floor or below,
// so that what the library needs never depends on what is built on it.
type floor int

const (
	below   floor = iota // what the library needs: internal/, scripts/lua, schedule, deliver
	library              // queue
	adapter              // built on queue: poller, api, api/apitoken, ui, deliver/dispatch, timerqtest
	app                  // cmd/..., examples/..., clients
)

func (f floor) String() string {
	return [...]string{"below the library", "the library", "the adapters", "the apps"}[f]
}

// floors puts each package on its floor by the longest prefix of its path
// in the module, segment by segment: a new package under internal/ is
// below the library unless it says otherwise here. deliver (the delivery
// engine, which imports nothing of timerq) is below queue, which checks
// endpoints with it; deliver/dispatch runs it over a queue's fires, so it
// is above.
var floors = map[string]floor{
	"internal":         below,
	"scripts":          below,
	"schedule":         below,
	"deliver":          below,
	"queue":            library,
	"poller":           adapter,
	"api":              adapter,
	"ui":               adapter,
	"timerqtest":       adapter,
	"deliver/dispatch": adapter,
	"cmd":              app,
	"examples":         app,
	"clients":          app,
}

// kits are the test kits in internal/: only tests (and other kits) import
// them, and they may import the library and the adapters they drive
// (consistency reads a queue), so they sit beside the floors rather than
// on one.
var kits = map[string]bool{
	"internal/redistest":    true,
	"internal/uitest":       true,
	"internal/consistency":  true,
	"internal/firerecorder": true,
	"internal/workertest":   true,
}

const module = "github.com/timerq/timerq"

// floorOf returns the floor of the package at path rel in the module.
func floorOf(rel string) (floor, bool) {
	for p := rel; p != "."; {
		if f, ok := floors[p]; ok {
			return f, true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0, false
}

// TestFloors fails when a package imports one on a higher floor, or when
// code other than a test imports a test kit. Tests are not held to the
// floors: an external test is a package of its own, and tests drive a
// package from above (queue's tests use the consistency kit, which reads
// a queue).
func TestFloors(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list ./...: %v\n%s", err, stderr)
	}
	seen := map[string]bool{}
	for line := range bytes.Lines(out) {
		fields := strings.Fields(string(line))
		if len(fields) == 0 || fields[0] == module {
			continue // this test's own package, which has no code
		}
		rel, ok := strings.CutPrefix(fields[0], module+"/")
		if !ok {
			t.Fatalf("go list ./... listed %s, outside the module", fields[0])
		}
		seen[rel] = true
		f, ok := floorOf(rel)
		if !ok {
			t.Errorf("%s is on no floor: add it to floors in layers_test.go and to docs/development.md's Floors", rel)
			continue
		}
		if kits[rel] {
			f = adapter
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if kits[dep] {
				// A kit is test code too: workertest starts its
				// servers with redistest.
				if !kits[rel] {
					t.Errorf("%s imports the test kit %s, which only tests may import", rel, dep)
				}
				continue
			}
			if g, ok := floorOf(dep); ok && g > f {
				t.Errorf("%s (%v) imports %s (%v): a package imports only its own floor or below; move what both need down a floor (docs/development.md, Floors)", rel, f, dep, g)
			}
		}
	}
	// Not vacuous: go list saw the packages the floors name.
	for _, rel := range []string{"queue", "internal/keyspace", "internal/timefmt", "deliver", "deliver/dispatch", "api/apitoken", "cmd/internal/worker", "internal/consistency"} {
		if !seen[rel] {
			t.Errorf("go list ./... did not list %s; got %d packages", rel, len(seen))
		}
	}
}
