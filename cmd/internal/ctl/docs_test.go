package ctl

import (
	"os"
	"strings"
	"testing"
)

// TestDocumentedImportLinesParse keeps the examples of docs/timerctl.md's
// import format true: each one parses, and the refused number form is
// refused.
func TestDocumentedImportLinesParse(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/timerctl.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Import and export format")
	if !ok {
		t.Fatal("docs/timerctl.md has no import format section")
	}
	n := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, `{"id"`) {
			continue
		}
		n++
		if _, err := parseLine([]byte(line), 64<<10); err != nil {
			t.Errorf("documented line %s is refused: %v", line, err)
		}
	}
	if n < 6 {
		t.Fatalf("found %d example lines, want the 6 documented", n)
	}
	if _, err := parseLine([]byte(`{"id":"x","due_at":1796238000}`), 64<<10); err == nil {
		t.Fatal("the documented refusal of a number is not refused")
	}
}
