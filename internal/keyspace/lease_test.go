package keyspace

import "testing"

// Lease's scan cursor moves in one script with its shard's fire stream, so
// both must share a slot.
func TestLeaseCursorsShareTheStreamSlot(t *testing.T) {
	for _, s := range []Space{Shard("orders", 0, 1), Shard("orders", 5, 8)} {
		if k := s.LeaseCursors(); Slot(k) != Slot(s.Fires()) {
			t.Errorf("%s: slot %d, stream %s slot %d", k, Slot(k), s.Fires(), Slot(s.Fires()))
		}
	}
	if got := Shard("orders", 0, 1).LeaseCursors(); got != "timerq:{orders}:lease-cursors" {
		t.Errorf("got %q", got)
	}
	if got := Shard("orders", 5, 8).LeaseCursors(); got != "timerq:{orders:5}:lease-cursors" {
		t.Errorf("got %q", got)
	}
}

// A timer's attempt log is written in one pipeline with its delivery's
// settlement, so it shares the fire stream's slot.
func TestAttemptsShareTheStreamSlot(t *testing.T) {
	for _, s := range []Space{Shard("orders", 0, 1), Shard("orders", 5, 8)} {
		if k := s.Attempts("t:1"); Slot(k) != Slot(s.Fires()) {
			t.Errorf("%s: slot %d, stream %s slot %d", k, Slot(k), s.Fires(), Slot(s.Fires()))
		}
	}
	if got := Shard("orders", 5, 8).Attempts("a{b}"); got != "timerq:{orders:5}:attempts:a{b}" {
		t.Errorf("got %q", got)
	}
}
