package queue

import (
	"context"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/scripts/lua"
)

// LayoutStatus is where a namespace's shards stand on the way from layout
// 1 to layout 2 of their keys (docs/redis-layout.md, "Layout 2").
type LayoutStatus struct {
	// Shards is the namespace's shard count.
	Shards int `json:"shards"`
	// Upgraded is how many shards are at layout 2: their scheduled timers
	// moved, in one atomic step, and every older timerq refused there
	// with ErrLayout.
	Upgraded int `json:"upgraded"`
	// Draining is how many settled (fired or cancelled) timers are still
	// in layout 1's sets of upgraded shards, to be moved by further
	// calls. Until they are, List and Stats leave them out; Get, Cancel
	// and Schedule see them.
	Draining int `json:"draining"`
}

// Done reports whether every shard is at layout 2 and drained.
func (s LayoutStatus) Done() bool { return s.Upgraded == s.Shards && s.Draining == 0 }

// UpgradeLayout takes one step of the upgrade of every shard of the
// namespace to layout 2, and returns where the namespace stands after it;
// call it again until LayoutStatus.Done. The first step of a shard moves
// its scheduled timers at once (a RENAME) and leaves the marker that makes
// every older timerq refuse the shard with ErrLayout before it writes;
// each step after it moves up to limit (1..MaxBatch) of the shard's
// settled timers. Each step is one script, so timers keep firing, and
// clients keep scheduling, through the upgrade, and a step cut short (a
// crash) leaves the shard as the previous step left it. It is idempotent:
// a step on a drained shard changes nothing, and overlapping callers are
// safe.
//
// Upgrade only once every timerq process that uses the namespace runs a
// build that knows layout 2 (this one or later): an older one stops with
// ErrLayout on each upgraded shard until it is upgraded. There is no way
// back to layout 1.
func (en Engine) UpgradeLayout(ctx context.Context, limit int) (LayoutStatus, error) {
	q := en.q
	if err := checkLimit("upgrade", limit); err != nil {
		return LayoutStatus{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return LayoutStatus{}, err
	}
	return en.upgradeStep(ctx, l, limit)
}

// upgradeStep is UpgradeLayout on the layout l.
func (en Engine) upgradeStep(ctx context.Context, l *layout, limit int) (LayoutStatus, error) {
	q := en.q
	calls := make([]call, len(l.spaces))
	for k := range calls {
		calls[k] = call{shard: k, args: []any{limit, keyspace.LayoutMarker(2)}}
	}
	replies, err := q.runMany(ctx, l, lua.Upgrade, calls)
	if err != nil {
		return LayoutStatus{}, errorf("upgrade the layout of namespace %q: %w", q.opts.Namespace, err)
	}
	st := LayoutStatus{Shards: len(l.spaces)}
	for k, reply := range replies {
		r, err := replyStrings(reply)
		if err != nil || len(r) != 2 {
			return LayoutStatus{}, errorf("upgrade: unexpected reply %v", reply)
		}
		l.at[k].Store(2)
		st.Upgraded++
		st.Draining += int(atoi(r[1]))
	}
	return st, nil
}
