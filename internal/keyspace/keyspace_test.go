package keyspace

import (
	"strings"
	"testing"
)

// With one shard the layout is exactly the one timerq used before sharding,
// so existing data keeps working.
func TestOneShardKeepsTheUnshardedNames(t *testing.T) {
	s := Shard("orders", 0, 1)
	want := []string{
		"timerq:{orders}:due", "timerq:{orders}:timers", "timerq:{orders}:fired",
		"timerq:{orders}:cancelled", "timerq:{orders}:expire", "timerq:{orders}:fires",
		"timerq:{orders}:counters",
	}
	if got := s.Keys(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Keys() = %v, want %v", got, want)
	}
	for got, want := range map[string]string{
		s.Wake():                          "timerq:{orders}:wake",
		s.TimerChannel("x-1"):             "timerq:{orders}:t:x-1",
		s.DeadLetter():                    "timerq:{orders}:dead",
		s.Schedules():                     "timerq:{orders}:schedules",
		s.SchedDue():                      "timerq:{orders}:sched-due",
		Namespace("orders").Schedules():   "timerq:{orders}:schedules",
		Namespace("orders").SchedDue():    "timerq:{orders}:sched-due",
		s.Traces():                        "timerq:{orders}:traces",
		s.Quarantine():                    "timerq:{orders}:quarantine",
		s.Deliveries():                    "timerq:{orders}:deliver",
		s.EndpointNames():                 "timerq:{orders}:endpoints",
		Namespace("orders").Endpoints():   "timerq:{orders}:endpoints",
		Namespace("orders").Meta():        "timerq:{orders}:meta",
		Namespace("orders").MaintLock():   "timerq:{orders}:maint-lock",
		Namespace("orders").WorkersSeen(): "timerq:{orders}:workers-seen",
		s.HashTag():                       "{orders}",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestShardedNamesCarryTheShardTag(t *testing.T) {
	s := Shard("orders", 7, 16)
	if s.Due() != "timerq:{orders:7}:due" || s.TimerChannel("a") != "timerq:{orders:7}:t:a" || s.HashTag() != "{orders:7}" {
		t.Fatalf("shard 7 of 16: %v %v %v", s.Due(), s.TimerChannel("a"), s.HashTag())
	}
	if s.Schedules() != "timerq:{orders:7}:schedules" || s.SchedDue() != "timerq:{orders:7}:sched-due" {
		t.Fatalf("shard 7 of 16: %v %v", s.Schedules(), s.SchedDue())
	}
	// The endpoints themselves are namespace-wide; each shard of several
	// keeps only their names, in its own slot.
	if s.EndpointNames() != "timerq:{orders:7}:endpoint-names" || s.Deliveries() != "timerq:{orders:7}:deliver" {
		t.Fatalf("shard 7 of 16: %v %v", s.EndpointNames(), s.Deliveries())
	}
}

// Every key and channel of one shard must hash to one slot, or a script
// (and SPUBLISH inside it) would fail with CROSSSLOT on a Cluster.
func TestEveryNameOfAShardHashesToOneSlot(t *testing.T) {
	for _, shards := range []int{1, 2, 16, MaxShards} {
		for _, s := range Shards("ns-1.x", shards) {
			names := append(s.Keys(), s.Wake(), s.TimerChannel("some-id"), s.TimerChannel("{other}"),
				s.DeadLetter(), s.TimerChannelPrefix(), s.Schedules(), s.SchedDue(), s.TimerChannel("sched@1767225600000"), s.Traces(), s.Quarantine(),
				s.Deliveries(), s.EndpointNames(), s.FlowState("g", FlowID("ep", "{tenant}")), s.FlowReady("g"),
				s.FlowParked("g"), s.FlowHint("g"))
			want := Slot(names[0])
			for _, n := range names {
				if Slot(n) != want {
					t.Fatalf("S=%d shard %d: %q is in slot %d, %q in %d", shards, s.Index(), n, Slot(n), names[0], want)
				}
			}
		}
	}
	// The namespace-wide keys share shard 0's slot only when unsharded.
	if Slot(Namespace("n").Meta()) != Slot(Shard("n", 0, 1).Due()) {
		t.Fatal("meta is not in the unsharded slot")
	}
}

// Slot must agree with Redis Cluster (values from the Cluster spec and
// CLUSTER KEYSLOT; the Cluster test in queue checks against a live server).
func TestSlotMatchesRedis(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            12739, // crc16 0x31C3
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": Slot("user1000"),
		"foo{}{bar}":           Slot("foo{}{bar}"), // empty tag: whole key
		"foo{{bar}}zap":        Slot("{bar"),
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if crc16("123456789") != 0x31C3 {
		t.Fatalf("crc16 check value = %#x, want 0x31c3", crc16("123456789"))
	}
}

// The shard function is pinned: changing it would strand every stored timer
// of a sharded namespace. These vectors must never change.
func TestShardOfIsPinned(t *testing.T) {
	for _, v := range []struct {
		id           string
		s2, s16, s1k int
	}{
		{"a", 1, 12, 163},
		{"order-1", 1, 10, 994},
		{"7f9c2ba4-e88f-4d2e-8a1b-9d0c3f2e1a55", 0, 2, 580},
		{"", 1, 13, 266},
		{"héllo", 1, 4, 962},
	} {
		if got := [3]int{ShardOf(v.id, 2), ShardOf(v.id, 16), ShardOf(v.id, 1024)}; got != [3]int{v.s2, v.s16, v.s1k} {
			t.Errorf("ShardOf(%q, 2/16/1024) = %v, want %v", v.id, got, [3]int{v.s2, v.s16, v.s1k})
		}
		if ShardOf(v.id, 1) != 0 {
			t.Errorf("ShardOf(%q, 1) != 0", v.id)
		}
		// An occurrence of a schedule named v.id is in the same shard.
		occ := v.id + "@1767225600000"
		if v.id != "" {
			if got := [3]int{ShardOf(occ, 2), ShardOf(occ, 16), ShardOf(occ, 1024)}; got != [3]int{v.s2, v.s16, v.s1k} {
				t.Errorf("ShardOf(%q, 2/16/1024) = %v, want %v", occ, got, [3]int{v.s2, v.s16, v.s1k})
			}
		}
	}
}

// Jump hash spreads IDs evenly and, when S grows by one, moves only the IDs
// that go to the new shard: the property a later resharding relies on.
func TestShardOfSpreadsAndMovesLittle(t *testing.T) {
	const n = 64000
	counts := make([]int, 16)
	moved := 0
	for i := range n {
		id := "timer-" + itoa(i)
		k := ShardOf(id, 16)
		counts[k]++
		if k2 := ShardOf(id, 17); k2 != k {
			if k2 != 16 {
				t.Fatalf("%q moved from shard %d to %d, not to the new shard", id, k, k2)
			}
			moved++
		}
	}
	for k, c := range counts {
		if c < n/16*9/10 || c > n/16*11/10 {
			t.Errorf("shard %d got %d of %d IDs, more than 10%% off even", k, c, n)
		}
	}
	if moved < n/17*8/10 || moved > n/17*12/10 {
		t.Errorf("growing 16->17 moved %d of %d IDs, want about 1/17", moved, n)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestPatternMatchesEveryShardOnly(t *testing.T) {
	if got := Namespace("a*b").Pattern(); got != `timerq:{a\*b[}:]*` {
		t.Fatalf("Pattern = %q", got)
	}
}

// A recurring script writes a schedule and its occurrences in one call, so
// an occurrence "<schedule>@<ms>" must be in its schedule's shard, whatever
// shard its own bytes hash to; any other ID is routed by its whole bytes.
func TestOccurrencesLiveInTheirSchedulesShard(t *testing.T) {
	moved := 0
	for _, shards := range []int{2, 16, MaxShards} {
		for i := range 2000 {
			sid := "sched-" + itoa(i)
			if i%3 == 0 {
				sid += "@team" // an '@' in the schedule ID itself
			}
			if i%7 == 0 {
				sid += "@42" // a schedule ID that itself has the occurrence form
			}
			k := ScheduleShard(sid, shards)
			if k != HashShard(sid, shards) {
				t.Fatalf("ScheduleShard(%q) = %d, not the hash of the whole ID", sid, k)
			}
			for _, ms := range []string{"0", "1767225600000", "999999999999999"} {
				occ := sid + "@" + ms
				if got := ShardOf(occ, shards); got != k {
					t.Fatalf("S=%d: occurrence %q in shard %d, its schedule %q in %d", shards, occ, got, sid, k)
				}
				if HashShard(occ, shards) != k {
					moved++
				}
			}
		}
	}
	if moved == 0 {
		t.Fatal("no occurrence hashes elsewhere than its schedule: the test proves nothing")
	}
	for _, id := range []string{"plain", "a@b", "x@12a", "@123", "x@", "x@+12", "x@-1", "x@1234567890123456"} {
		if ShardOf(id, 16) != HashShard(id, 16) {
			t.Errorf("ShardOf(%q) is not the hash of the whole ID", id)
		}
	}
}

func TestSplitOccurrence(t *testing.T) {
	for id, want := range map[string][2]string{
		"report@1767225600000":  {"report", "1767225600000"},
		"a@b@7":                 {"a@b", "7"},
		"x@123456789012345":     {"x", "123456789012345"},
		"team@example.com@0":    {"team@example.com", "0"},
		"plain":                 {},
		"@123":                  {},
		"x@":                    {},
		"x@12a":                 {},
		"x@+12":                 {},
		"x@-0":                  {},
		"x@1234567890123456":    {},
		"x@١٢٣":                 {}, // non-ASCII digits
		"report@1767225600000 ": {},
	} {
		sid, ms, ok := SplitOccurrence(id)
		if ok != (want != [2]string{}) || sid != want[0] || ms != want[1] {
			t.Errorf("SplitOccurrence(%q) = %q, %q, %v; want %q", id, sid, ms, ok, want)
		}
	}
}
