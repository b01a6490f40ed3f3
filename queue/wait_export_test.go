package queue

import "time"

// WaitSubscribed reports whether the waiters on id have a confirmed
// subscription: Redis has processed the SUBSCRIBE, so a message published
// on id's channel from now on reaches them. Tests await it instead of
// sleeping before they fire, cancel or close.
func WaitSubscribed(q *Queue, id string) bool {
	return inspectWait(q, id, func(*hub, string) bool { return true })
}

// WaitSettled reports whether id's waiters are subscribed and no state
// read is queued for them: what settles them next is a message or the
// periodic recheck.
func WaitSettled(q *Queue, id string) bool {
	return inspectWait(q, id, func(h *hub, ch string) bool { return !h.pending[ch] })
}

func inspectWait(q *Queue, id string, more func(h *hub, ch string) bool) bool {
	q.mu.Lock()
	h := q.hub
	q.mu.Unlock()
	if h == nil {
		return false
	}
	ch := h.l.spaces[h.l.shardOf(id)].TimerChannel(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[ch]
	return e != nil && e.confirmed && len(e.waiters) > 0 && more(h, ch)
}

// LeasePoll is leasePoll: how long a blocking Lease waits before it runs
// a round anyway.
const LeasePoll = leasePoll

// LeaseCursors is shard k's lease cursors hash (lease.lua's KEYS[9]).
func LeaseCursors(q *Queue, k int) string { return q.known().spaces[k].LeaseCursors() }

// SetLeaserFresh sets how long after a call that drained the streams the
// next call of lr skips its first round (leaserFresh), so that a test does
// not depend on the machine's speed between two calls.
func SetLeaserFresh(lr *Leaser, d time.Duration) { lr.fresh = d }

// LeaserWaitsFirst reports whether lr's next call with a Block waits for a
// new fire before its first round.
func LeaserWaitsFirst(lr *Leaser) bool { return lr.last != nil }
