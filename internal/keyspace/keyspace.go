// Package keyspace is the only code that knows timerq's Redis key names,
// channel names, and how a timer ID maps to a shard. queue, poller, the
// bench and the tests all build names through it, so the layout can change
// in one place.
//
// A namespace NS has S shards, fixed when it is created (1 ≤ S ≤ MaxShards).
// Every key and channel of one shard carries one hash tag, so each script
// touches one Redis Cluster slot:
//
//	S = 1:  {NS}      (exactly the layout timerq used before sharding)
//	S > 1:  {NS:k}    for shard k in 0..S-1
//
// Keys that belong to the whole namespace (its metadata, the maintenance
// lock, the worker membership) always carry {NS}. Recurring schedules are
// per shard: a schedule lives in the shard of its ID, beside its
// occurrences (see ShardOf).
package keyspace

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// Prefix starts every timerq key and channel.
const Prefix = "timerq:"

// MaxShards is the most shards a namespace may have.
const MaxShards = 1024

// Namespace names a namespace's namespace-wide keys.
type Namespace string

func (ns Namespace) key(suffix string) string { return Prefix + "{" + string(ns) + "}:" + suffix }

// Meta is the namespace's metadata hash (field "shards"), written once by
// queue.CreateNamespace. A namespace without it has one shard.
func (ns Namespace) Meta() string { return ns.key("meta") }

// Schedules is the schedules hash of the namespace when it has one shard,
// Shard(NS, 0, 1).Schedules(). A namespace of several shards has one per
// shard (Space.Schedules); use that wherever the shard is known.
func (ns Namespace) Schedules() string { return Shard(string(ns), 0, 1).Schedules() }

// SchedDue is the sched-due set of the namespace when it has one shard,
// Shard(NS, 0, 1).SchedDue(); see Schedules.
func (ns Namespace) SchedDue() string { return Shard(string(ns), 0, 1).SchedDue() }

// MaintLock is the key of the maintenance lock, held by one worker at a time.
func (ns Namespace) MaintLock() string { return ns.key("maint-lock") }

// Workers is the membership sorted set of the namespace's workers: member =
// worker ID, score = the Redis time (ms) its heartbeat expires.
func (ns Namespace) Workers() string { return ns.key("workers") }

// WorkersSeen is a hash describing the namespace's latest heartbeat: field
// "at" = its Redis time (ms), "worker" = the worker ID, "left" = 1 if it
// was a worker leaving. It outlives the membership, so an operator can tell
// when a namespace last had a worker.
func (ns Namespace) WorkersSeen() string { return ns.key("workers-seen") }

// Endpoints is the hash of the namespace's delivery endpoints: name -> the
// endpoint as JSON (queue.Endpoint), signing secrets included. It is
// stored once per namespace; each shard keeps only the names
// (Space.EndpointNames), so that scheduling checks a name in its own slot.
func (ns Namespace) Endpoints() string { return ns.key("endpoints") }

// DeliveryPolicy is the hash of the namespace's delivery policy
// (queue.DeliveryPolicy): field "allow_timer_urls" = "1" or "0".
func (ns Namespace) DeliveryPolicy() string { return ns.key("delivery-policy") }

// Pattern matches every key and channel of the namespace, of every shard.
// It is a KEYS/SCAN pattern; glob characters in NS are escaped.
func (ns Namespace) Pattern() string {
	return Prefix + "{" + GlobEscape(string(ns)) + "[}:]*"
}

// Space is one shard of a namespace: the keys and channels that live in one
// Cluster slot.
type Space struct {
	ns     Namespace
	shard  int
	shards int
	tag    string // "timerq:{NS}:" or "timerq:{NS:k}:"
	layout int    // 0 or 1: layout 1; 2: layout 2 (AtLayout)
}

// AtLayout returns the shard's keys as layout layout names them (1 or 2;
// docs/redis-layout.md): in layout 2 the scheduled and the settled timers
// share the sched set, so Due and the settled sets of Keys name it.
func (s Space) AtLayout(layout int) Space {
	s.layout = layout
	return s
}

// Layout is the layout the Space names keys for: 1 or 2.
func (s Space) Layout() int { return max(s.layout, 1) }

// Shard returns shard k of a namespace of shards shards. With shards == 1 it
// is the unsharded layout, {NS}.
func Shard(ns string, k, shards int) Space {
	tag := Prefix + "{" + ns + "}:"
	if shards > 1 {
		tag = Prefix + "{" + ns + ":" + strconv.Itoa(k) + "}:"
	}
	return Space{ns: Namespace(ns), shard: k, shards: shards, tag: tag}
}

// Shards returns every shard of a namespace, in order.
func Shards(ns string, shards int) []Space {
	out := make([]Space, shards)
	for k := range out {
		out[k] = Shard(ns, k, shards)
	}
	return out
}

// Namespace is the namespace the shard belongs to, whose namespace-wide
// keys (Meta, Workers) some scripts take beside or instead of the shard's.
func (s Space) Namespace() Namespace { return s.ns }

// Index is the shard's number, 0..Count-1.
func (s Space) Index() int { return s.shard }

// Count is the namespace's shard count.
func (s Space) Count() int { return s.shards }

// HashTag is the shard's hash tag, with braces: {NS} or {NS:k}.
func (s Space) HashTag() string { return s.tag[len(Prefix) : len(s.tag)-1] }

// Due is the sorted set of scheduled timers (score = due ms): in layout 2
// the sched set (Sched), which holds the settled timers too, in bands
// above every due time.
func (s Space) Due() string {
	if s.layout == 2 {
		return s.Sched()
	}
	return s.LegacyDue()
}

// LegacyDue is layout 1's due set. In layout 2 it holds the marker that
// stops an older build (LayoutMarker): upgrade.lua renames the set to
// Sched and leaves the marker in its place.
func (s Space) LegacyDue() string { return s.tag + "due" }

// Sched is layout 2's set of timers: scheduled ones at their due time,
// settled ones in the bands above every due time
// (scripts/lua/includes/layout.lua).
func (s Space) Sched() string { return s.tag + "sched" }

// Timers is the hash of records.
func (s Space) Timers() string { return s.tag + "timers" }

// Fired is the sorted set of fired timers awaiting purge.
func (s Space) Fired() string { return s.tag + "fired" }

// Cancelled is the sorted set of cancelled timers awaiting purge.
func (s Space) Cancelled() string { return s.tag + "cancelled" }

// Expire is the sorted set of settled timers by purge time.
func (s Space) Expire() string { return s.tag + "expire" }

// Fires is the fire stream.
func (s Space) Fires() string { return s.tag + "fires" }

// DeadLetter is the dead-letter stream of events whose handlers kept
// failing. It is per shard so that moving an entry there and acknowledging
// it in the fire stream is one MULTI in one slot.
func (s Space) DeadLetter() string { return s.tag + "dead" }

// Counters is the hash of totals that claims add to (fired, lateness).
func (s Space) Counters() string { return s.tag + "counters" }

// Traces is the hash of the W3C traceparents of scheduled timers that were
// scheduled inside a sampled trace (id -> traceparent). It exists only once
// a traced timer was scheduled; schedule, claim and purge take it as their
// eighth key.
func (s Space) Traces() string { return s.tag + "traces" }

// Quarantine is the hash of records the claim moved aside because they are
// not records timerq writes (id -> "<quarantined_ms>:<due score>:<reason>:
// <raw record>", see scripts/lua/includes/quarantine.lua), so that one bad record does
// not stop the shard. claim.lua takes it as its ninth key.
func (s Space) Quarantine() string { return s.tag + "quarantine" }

// Hold is the hash of the one claim of the shard that is held but not yet
// committed, in a namespace with replicas (queue.SetReplicas): its token,
// lease, fire time, fire stream entry IDs and timers
// (scripts/lua/hold.lua), and the last entry ID a commit added, which
// outlives the hold. hold.lua and commit.lua take it as their tenth key.
func (s Space) Hold() string { return s.tag + "hold" }

// Keys are the seven keys every script takes, in the order of
// scripts/lua/includes/check_types.lua: due, timers, fired, cancelled, expire, fires,
// counters. In layout 2 the sched set stands for due, fired, cancelled and
// expire (the scripts' layout-2 builds read it so; includes/layout.lua).
func (s Space) Keys() []string {
	if s.layout == 2 {
		sched := s.Sched()
		return []string{sched, s.Timers(), sched, sched, sched, s.Fires(), s.Counters()}
	}
	return []string{s.Due(), s.Timers(), s.Fired(), s.Cancelled(), s.Expire(), s.Fires(), s.Counters()}
}

// EndpointNames is the hash schedule.lua checks a delivering timer's
// endpoint name in (HEXISTS), in the shard's own slot. With one shard it is
// the namespace's Endpoints hash itself; with several, each shard has a
// hash of the names only (name -> "1"), which queue.Endpoints.Put writes
// after the Endpoints hash and queue.Endpoints.Delete clears before it.
func (s Space) EndpointNames() string {
	if s.shards <= 1 {
		return s.ns.Endpoints()
	}
	return s.tag + "endpoint-names"
}

// Deliveries is the hash of the shard's scheduled timers that deliver to an
// endpoint: id -> endpoint name. schedule.lua writes it; claim.lua moves
// the name into the fire stream entry (field "endpoint"); purge.lua drops a
// cancelled timer's.
func (s Space) Deliveries() string { return s.tag + "deliver" }

// Schedules is the hash of the recurring schedules that live in this
// shard (scripts/lua/includes/recur_keys.lua): those whose ID ScheduleShard puts
// here. With one shard it is timerq:{NS}:schedules, as before sharding.
func (s Space) Schedules() string { return s.tag + "schedules" }

// SchedDue is the sorted set of the shard's active recurring schedules by
// the due time of their earliest armed occurrence.
func (s Space) SchedDue() string { return s.tag + "sched-due" }

// Wake is the channel on which schedules announce a new earliest due time.
func (s Space) Wake() string { return s.tag + "wake" }

// TimerChannelPrefix is the prefix of each timer's own channel.
func (s Space) TimerChannelPrefix() string { return s.tag + "t:" }

// TimerChannel is the channel on which the timer id's firing or
// cancellation is announced. id must belong to this shard.
func (s Space) TimerChannel(id string) string { return s.tag + "t:" + id }

// ShardOf returns the shard of a timer ID in a namespace of shards shards.
// An ID of a recurring schedule's occurrence, "<schedule ID>@<digits>" (see
// SplitOccurrence), is in the shard of its schedule, ScheduleShard of the
// part before the last '@', so that one script sees a schedule and its
// occurrences. Any other ID is in HashShard(id).
//
// The queue refuses that form for a plain timer (queue.ErrOccurrenceID);
// one written before that (say "x@123") is in the shard of "x", not of "x@123": this rule came with recurring
// schedules in sharded namespaces, and a namespace of several shards
// created before it that holds such IDs finds them on their old shard
// (docs/redis-layout.md). With one shard every ID is in shard 0.
func ShardOf(id string, shards int) int {
	if sid, _, ok := SplitOccurrence(id); ok {
		return HashShard(sid, shards)
	}
	return HashShard(id, shards)
}

// ScheduleShard returns the shard a recurring schedule lives in: the hash
// of its whole ID, even when that ID itself looks like an occurrence's. Its
// occurrences "<id>@<ms>" are routed there by ShardOf.
func ScheduleShard(scheduleID string, shards int) int { return HashShard(scheduleID, shards) }

// HashShard is the pinned hash behind ShardOf and ScheduleShard: jump
// consistent hash (Lamping & Veach, 2014) of the 64-bit FNV-1a hash of the
// bytes. It is pinned by test vectors and will not change: a different
// function would strand every stored timer. Jump hash moves only about
// 1/(S+1) of the IDs when S grows by one, so a later resharding moves
// little data.
func HashShard(id string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return int(jump(h.Sum64(), shards))
}

// MaxOccurrenceDigits is the most digits the nominal time of an occurrence
// ID may have: Unix ms up to the year 9999 has at most 15.
const MaxOccurrenceDigits = 15

// SplitOccurrence splits an occurrence's ID "<schedule ID>@<nominal Unix
// ms>" at its last '@': ok when the schedule ID is not empty and the rest
// is 1 to MaxOccurrenceDigits ASCII digits. It is the one definition of
// the form, used for routing (ShardOf) and by queue.ParseOccurrenceID.
func SplitOccurrence(id string) (scheduleID, ms string, ok bool) {
	i := strings.LastIndexByte(id, '@')
	if i <= 0 || i == len(id)-1 || len(id)-i-1 > MaxOccurrenceDigits {
		return "", "", false
	}
	for j := i + 1; j < len(id); j++ {
		if id[j] < '0' || id[j] > '9' {
			return "", "", false
		}
	}
	return id[:i], id[i+1:], true
}

// jump is jump consistent hash, as published.
func jump(key uint64, buckets int) int64 {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return b
}

// Slot returns the Redis Cluster slot of a key or shard channel: CRC16
// (XMODEM) of its hash tag, or of the whole key without one, mod 16384.
func Slot(key string) int {
	if s := indexByte(key, '{'); s >= 0 {
		if e := indexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) % 16384)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
