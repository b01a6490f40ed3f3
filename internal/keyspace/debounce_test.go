package keyspace

import "testing"

// A debounce key's window string is read in one script with the window's
// timer, "<key>@<ms>", so both must be in one slot, whatever the key holds
// (a '{', an '@' and digits of its own).
func TestDebounceKeySharesItsTimersSlot(t *testing.T) {
	for _, key := range []string{"user-7", "a{b}c", "x@123", "{}"} {
		for _, shards := range []int{1, 16} {
			k := ScheduleShard(key, shards)
			sp := Shard("orders", k, shards)
			id := key + "@1764900000123"
			if got := ShardOf(id, shards); got != k {
				t.Errorf("%q in %d shards: the timer %q is in shard %d, the key in %d", key, shards, id, got, k)
			}
			if Slot(sp.Debounce(key)) != Slot(sp.Timers()) {
				t.Errorf("%s: slot %d, timers slot %d", sp.Debounce(key), Slot(sp.Debounce(key)), Slot(sp.Timers()))
			}
		}
	}
	if got := Shard("orders", 0, 1).Debounce("user-7"); got != "timerq:{orders}:debounce:user-7" {
		t.Errorf("got %q", got)
	}
}
