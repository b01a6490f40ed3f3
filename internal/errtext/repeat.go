package errtext

import (
	"regexp"
	"strings"
)

// clauses splits a message into its clauses, at the punctuation that
// joins a cause to its hint and one hint to the next.
var clauses = regexp.MustCompile(`[;:,]\s+|\s*\(|\)`)

// hintMarkers are words that belong to one hint each: a message that
// holds one twice gives that hint twice.
var hintMarkers = []string{"docs/security.md", "raise maxmemory", "another program writes", "remove those keys", "check that Redis is reachable"}

// RepeatedHint returns a hint that msg gives twice (a clause of four
// words or more, or one of the hints every edge passes through), or "".
// Each hint is written once, in package queue; the edges (the API, the
// binaries) add their own words around it, and their tests hold with
// RepeatedHint that no layer writes a hint a second time.
func RepeatedHint(msg string) string {
	for _, m := range hintMarkers {
		if strings.Count(msg, m) > 1 {
			return m
		}
	}
	seen := map[string]bool{}
	for _, c := range clauses.Split(msg, -1) {
		c = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c, "so "), "or "))
		if len(strings.Fields(c)) < 4 {
			continue
		}
		if seen[c] {
			return c
		}
		seen[c] = true
	}
	return ""
}
