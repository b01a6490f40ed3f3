package queue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// QuarantineNotice is a record a claim moved to the quarantine, as the
// claim reports it (ClaimResult.Quarantined).
type QuarantineNotice struct {
	// ID is the timer ID the record was stored under.
	ID string
	// Shard is the shard whose quarantine holds it.
	Shard int
	// Reason says why it could not fire: "malformed record" or "due score
	// is not a due time".
	Reason string
}

// QuarantinedRecord is a record in a shard's quarantine: something other
// than timerq wrote it under the namespace, in a form timerq cannot fire,
// and a claim moved it aside, byte for byte, so that the timers beside it
// kept firing. It stays until dropped (Quarantine.Drop); timerq never
// fires it, and its ID is free to be scheduled again. The timer's owner,
// labels, epoch and deadline are not kept: the claim deleted them, and its
// owner index entry, with the record, so that neither the owner's
// NextWake nor a bulk cancel finds a timer that is gone, and the ID
// scheduled again starts without them.
type QuarantinedRecord struct {
	ID    string
	Shard int
	// Raw is the record exactly as it was in the timers hash.
	Raw []byte
	// DueScore is its score in the due set, as Redis printed it.
	DueScore string
	// Reason is why the claim moved it (QuarantineNotice.Reason).
	Reason string
	// QuarantinedAt is when, by the Redis server clock.
	QuarantinedAt time.Time
}

// MalformedRecord is a record that a listing skipped because it is not one
// timerq writes (ListPage.Malformed). One in the due set is quarantined by
// the next claim; one in the fired or cancelled set stays until purged.
type MalformedRecord struct {
	ID    string
	Shard int
	// Raw is the record as stored.
	Raw []byte
	// Reason says what is wrong with it.
	Reason string

	pos int64 // its score in its set, in µs, where the listing met it
}

// quarantineScan is the HSCAN page size for reading a quarantine.
const quarantineScan = 500

// List returns every record in the namespace's quarantines, by shard
// and then ID. A quarantine holds only what a claim moved there, so it is
// small; it is read with HSCAN, which never blocks Redis for long.
func (qr Quarantine) List(ctx context.Context) ([]QuarantinedRecord, error) {
	q := qr.q
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	var out []QuarantinedRecord
	for k, sp := range l.spaces {
		var shard []QuarantinedRecord
		cursor := uint64(0)
		for {
			kv, next, err := q.rdb.HScan(ctx, sp.Quarantine(), cursor, "", quarantineScan).Result()
			if err != nil {
				return nil, errorf("quarantine: read %s: %w", sp.Quarantine(), q.redisError(err))
			}
			for i := 0; i+1 < len(kv); i += 2 {
				shard = append(shard, parseQuarantined(kv[i], k, kv[i+1]))
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		// HSCAN may return a field twice; keep one.
		slices.SortFunc(shard, func(a, b QuarantinedRecord) int { return strings.Compare(a.ID, b.ID) })
		out = append(out, slices.CompactFunc(shard, func(a, b QuarantinedRecord) bool { return a.ID == b.ID })...)
	}
	return out, nil
}

// parseQuarantined reads a quarantine value, "<quarantined_ms>:<due
// score>:<reason>:<raw>" (scripts/lua/includes/quarantine.lua). A value of
// another form (written by hand) is kept whole as Raw.
func parseQuarantined(id string, shard int, v string) QuarantinedRecord {
	r := QuarantinedRecord{ID: id, Shard: shard, Raw: []byte(v), Reason: "unreadable quarantine entry"}
	f := strings.SplitN(v, ":", 4)
	if len(f) == 4 && (f[0] == "" || isMillis(f[0])) {
		r.DueScore, r.Reason, r.Raw = f[1], f[2], []byte(f[3])
		if f[0] != "" {
			r.QuarantinedAt = fromMillis(atoi(f[0]))
		}
	}
	return r
}

// Drop deletes the quarantined record id from every shard's
// quarantine and reports whether there was one. Nothing else refers to a
// quarantined record, so dropping it is final and changes nothing else.
func (qr Quarantine) Drop(ctx context.Context, id string) (bool, error) {
	q := qr.q
	l, err := q.layout(ctx)
	if err != nil {
		return false, err
	}
	cmds := make([]*redis.IntCmd, len(l.spaces))
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, sp := range l.spaces {
			cmds[k] = p.HDel(ctx, sp.Quarantine(), id)
		}
		return nil
	})
	if err != nil {
		return false, errorf("drop quarantined %q: %w", id, q.redisError(err))
	}
	dropped := false
	for _, c := range cmds {
		dropped = dropped || c.Val() > 0
	}
	return dropped, nil
}

// Restore writes quarantined records, as Quarantine returned
// them from this or another namespace, into this namespace's quarantine,
// so that an export and import keep them. Each goes to its Shard when the
// namespace has that shard, else to the shard of its ID. An ID already
// quarantined there is left as it is. It reports how many it wrote.
func (qr Quarantine) Restore(ctx context.Context, recs []QuarantinedRecord) (int, error) {
	q := qr.q
	l, err := q.layout(ctx)
	if err != nil {
		return 0, err
	}
	for _, r := range recs {
		if err := ValidateID(r.ID); err != nil {
			return 0, errorf("restore quarantined: %w", err)
		}
		if strings.Contains(r.DueScore, ":") || strings.Contains(r.Reason, ":") {
			return 0, fmt.Errorf("%w: quarantined record %q: due score %q and reason %q may not hold ':'",
				ErrInvalidOptions, r.ID, r.DueScore, r.Reason)
		}
	}
	cmds := make([]*redis.BoolCmd, len(recs))
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range recs {
			k := r.Shard
			if k < 0 || k >= len(l.spaces) {
				k = l.shardOf(r.ID)
			}
			at := "" // a malformed record a listing met, never quarantined
			if !r.QuarantinedAt.IsZero() {
				at = strconv.FormatInt(millis(r.QuarantinedAt), 10)
			}
			v := at + ":" + r.DueScore + ":" + r.Reason + ":" + string(r.Raw)
			cmds[i] = p.HSetNX(ctx, l.spaces[k].Quarantine(), r.ID, v)
		}
		return nil
	})
	if err != nil {
		return 0, errorf("restore quarantined: %w", q.redisError(err))
	}
	n := 0
	for _, c := range cmds {
		if c.Val() {
			n++
		}
	}
	return n, nil
}
