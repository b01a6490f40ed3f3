package keyspace

import (
	"strings"
	"testing"
)

// A group's overlap hash is checked in one script with its shard's fire
// stream, so both must share a slot.
func TestOverlapKeySharesTheStreamSlot(t *testing.T) {
	for _, s := range []Space{Shard("orders", 0, 1), Shard("orders", 5, 8)} {
		k := s.Overlap("billing")
		if Slot(k) != Slot(s.Fires()) || !strings.HasPrefix(k, s.tag) {
			t.Errorf("%s: slot %d, stream %s slot %d", k, Slot(k), s.Fires(), Slot(s.Fires()))
		}
	}
	if got := Shard("orders", 0, 1).Overlap("billing"); got != "timerq:{orders}:overlap:billing" {
		t.Errorf("got %q", got)
	}
}
