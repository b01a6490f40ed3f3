package ctl

import (
	"os"
	"strings"
	"testing"
)

// TestDocumentedScheduleLineParses keeps docs/timerctl.md's schedule line
// true: it is a schedule line, and it parses.
func TestDocumentedScheduleLineParses(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/timerctl.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Import and export format")
	n := 0
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, `{"kind":"quarantined"`) {
			// The quarantined line of the same section parses too.
			if k, err := lineKind([]byte(line)); err != nil || k != kindQuarantined {
				t.Errorf("documented line %s: kind %q, %v", line, k, err)
			}
			if r, err := parseQuarantineLine([]byte(line)); err != nil || r.ID != "bad" || string(r.Raw) != "garbage" || r.QuarantinedAt.IsZero() {
				t.Errorf("documented line %s: %+v, %v", line, r, err)
			}
			continue
		}
		if !strings.HasPrefix(line, `{"kind"`) {
			continue
		}
		n++
		if k, err := lineKind([]byte(line)); err != nil || k != kindSchedule {
			t.Errorf("documented line %s: kind %q, %v", line, k, err)
		}
		in, err := parseScheduleLine([]byte(line))
		if err != nil || in.Overlap != "skip" || len(in.Pending) != 2 {
			t.Errorf("documented line %s: %+v, %v", line, in, err)
		}
	}
	if n != 1 {
		t.Fatalf("found %d schedule lines, want 1", n)
	}
}
