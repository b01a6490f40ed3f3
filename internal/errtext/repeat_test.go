package errtext

import "testing"

// TestRepeatedHint: a hint given twice is found, whether it is one of the
// markers or any clause of four words or more; a message that gives each
// hint once has none.
func TestRepeatedHint(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"WRONGTYPE at timerq:{a}:due: another program writes under timerq:{a}:*; remove those keys", ""},
		{"OOM: raise maxmemory or free memory; raise maxmemory (docs/operations.md)", "raise maxmemory"},
		{"grant it with the ACL rule +hlen; grant it with the ACL rule +hlen", "grant it with the ACL rule +hlen"},
		{"retry later; retry later", ""}, // two words: too short to be a hint
	} {
		if got := RepeatedHint(tc.msg); got != tc.want {
			t.Errorf("RepeatedHint(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}
