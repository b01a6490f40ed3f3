package queue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// restoreSet is one timer of each state, for a namespace.
func restoreSet() (settled, scheduled []queue.Timer) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	settled = []queue.Timer{
		{ID: "f", State: queue.StateFired, Due: now.Add(-time.Hour), CreatedAt: now.Add(-2 * time.Hour), FiredAt: now.Add(-time.Hour), Payload: binaryPayload()},
		{ID: "c", State: queue.StateCancelled, Due: now.Add(time.Hour), CreatedAt: now.Add(-2 * time.Hour), CancelledAt: now.Add(-time.Minute)},
	}
	// Due before the namespace's "pre" timer: restoring it publishes a wake.
	scheduled = []queue.Timer{{ID: "s", State: queue.StateScheduled, Due: now.Add(30 * time.Minute), CreatedAt: now, Payload: []byte("s")}}
	return settled, scheduled
}

// TestRestoreRefusedByACLWritesNothing runs Restore as users that each lack
// one right it needs: a refusal is ErrPermission and leaves the namespace as
// it was, never half restored. Only real Redis has ACLs.
func TestRestoreRefusedByACLWritesNothing(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	admin := srv.Client(t)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	p := "timerq:{" + ns + "}:"
	users := []struct {
		name  string
		rules []any
		// settledOK: restoring settled timers needs no channel right.
		settledOK bool
	}{
		// The natural rule: key rights only; Redis 7 grants no channels.
		{"nochannels", []any{"~" + p + "*", "+@all"}, true},
		// May read the retention set but not write it.
		{"readonlyexpire", []any{"~" + p + "due", "~" + p + "timers", "~" + p + "fired", "~" + p + "cancelled",
			"~" + p + "fires", "%R~" + p + "expire", "&*", "+@all"}, false},
		// May run HSET but not ZADD: without the script's ACL pre-check the
		// records would be written and the sets not.
		{"nozadd", []any{"~" + p + "*", "&*", "+@all", "-zadd"}, false},
		// May not write the cancelled set at all.
		{"nocancelledkey", []any{"~" + p + "due", "~" + p + "timers", "~" + p + "fired", "%R~" + p + "cancelled",
			"~" + p + "expire", "~" + p + "fires", "&*", "+@all"}, false},
	}
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			args := append([]any{"ACL", "SETUSER", u.name, "on", ">pw", "resetchannels"}, u.rules...)
			if err := admin.Do(ctx, args...).Err(); err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: u.name, Password: "pw"})
			defer rdb.Close()
			q, err := queue.New(rdb, queue.Options{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			adminQ, _ := queue.New(admin, queue.Options{Namespace: ns})
			defer adminQ.Close()
			// Something already there, so that "nothing changed" is not
			// just "nothing exists".
			if _, err := adminQ.Schedule(ctx, "pre-"+u.name, time.Now().Add(time.Hour), nil); err != nil {
				t.Fatal(err)
			}
			settled, scheduled := restoreSet()
			for i := range settled {
				settled[i].ID += "-" + u.name
			}
			scheduled[0].ID += "-" + u.name
			before := snapshot(t, admin, adminQ)
			_, err = q.Restore(ctx, slices.Concat(settled, scheduled))
			if !errors.Is(err, queue.ErrPermission) {
				t.Fatalf("restore as %s: err = %v, want ErrPermission", u.name, err)
			}
			if after := snapshot(t, admin, adminQ); before != after {
				t.Fatalf("a refused restore (%v) changed the namespace:\n%s\nwas\n%s", err, after, before)
			}
			_, err = q.Restore(ctx, settled)
			if u.settledOK != (err == nil) {
				t.Fatalf("restore of settled timers as %s: err = %v, want success %v", u.name, err, u.settledOK)
			}
			if err != nil && before != snapshot(t, admin, adminQ) {
				t.Fatalf("a refused restore of settled timers changed the namespace")
			}
		})
	}
}

// TestRestoreUnderOOMWritesNothing fills Redis to maxmemory (noeviction):
// Restore fails with ErrOutOfMemory and writes nothing.
func TestRestoreUnderOOMWritesNothing(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Args: []string{"--maxmemory-policy", "noeviction"}})
	rdb := srv.Client(t)
	ctx := context.Background()
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Schedule(ctx, "pre", time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	settled, scheduled := restoreSet()
	before := snapshot(t, rdb, q)
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = q.Restore(ctx, slices.Concat(settled, scheduled))
	if cerr := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); cerr != nil {
		t.Fatal(cerr)
	}
	if !errors.Is(err, queue.ErrOutOfMemory) {
		t.Fatalf("restore at maxmemory: err = %v, want ErrOutOfMemory", err)
	}
	if before != snapshot(t, rdb, q) {
		t.Fatal("a restore refused for memory changed the namespace")
	}
	if _, err := q.Restore(ctx, slices.Concat(settled, scheduled)); err != nil {
		t.Fatalf("restore with memory again: %v", err)
	}
}
