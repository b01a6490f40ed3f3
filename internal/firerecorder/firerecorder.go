// Package firerecorder records every fire of a namespace that a client
// could have seen while a fault happens, so that a test can tell a timer
// that fired twice from one that fired once, even when the fault rewrote
// the evidence: after a failover the final fire streams show each timer
// once, though a reader of the demoted master saw a fire that the new
// master then repeated as a different event.
//
// A Recorder polls the fire stream of every shard on every node it is
// given (masters and replicas alike, each on its own connection, so a
// stopped node delays only its own reads) every Options.Interval, and
// listens on every node to the namespace's wakeups (classic pub/sub, by
// pattern). On each wakeup heard on a node it reads, at once and on that
// node, the timer's record, as a Get would: a master that is about to
// learn it was demoted shows its fire there for a moment, and its fire
// stream entry may be gone before the next poll.
//
// A fire event is identified by its stream entry ID and its fired time (a
// record read gives only the fired time): the same event read on several
// nodes, or again after a promoted replica committed the same held
// decision, counts once; two events of one timer with different entry IDs
// or fired times are a duplicate.
package firerecorder

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
)

// DefaultInterval is how often a Recorder polls each node's fire streams
// when Options.Interval is 0.
const DefaultInterval = 20 * time.Millisecond

// Options configures a Recorder.
type Options struct {
	// Nodes are the addresses (host:port) of every Redis node a client
	// could read: all masters and replicas, Sentinel-managed or Cluster.
	Nodes []string
	// Namespace and Shards name the fire streams to read.
	Namespace string
	Shards    int
	// Interval is how often each node's streams are read; 0 means
	// DefaultInterval (20 ms).
	Interval time.Duration
}

// Event is one fire as a client read it from a fire stream.
type Event struct {
	Timer string
	// EntryID is the fire stream entry's ID; empty for an event read only
	// from the timer's record so far.
	EntryID string
	Due     int64 // ms, the entry's due field
	Fired   int64 // ms, the entry's fired field
	// Node is the first node it was read on, and Seen when.
	Node string
	Seen time.Time
}

// Recorder records fires; see the package doc. Stop it to get the Report.
type Recorder struct {
	opts   Options
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	events  map[string][]Event // by timer, distinct
	wakeups map[string]int
	woke    map[string]time.Time // first wakeup per timer
	errs    map[string]int       // failed polls per node
}

// Start starts recording. It returns once every node's wakeup subscription
// is confirmed, so that every wakeup from then on is heard (a node that
// cannot be reached fails Start).
func Start(ctx context.Context, o Options) (*Recorder, error) {
	if len(o.Nodes) == 0 || o.Namespace == "" || o.Shards < 1 {
		return nil, errors.New("firerecorder: Options needs Nodes, Namespace and Shards")
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Recorder{opts: o, cancel: cancel, events: map[string][]Event{}, wakeups: map[string]int{},
		woke: map[string]time.Time{}, errs: map[string]int{}}
	pattern := keyspace.Namespace(o.Namespace).Pattern()
	for _, addr := range o.Nodes {
		sub := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		ps := sub.PSubscribe(ctx, pattern)
		if _, err := ps.Receive(ctx); err != nil {
			_ = ps.Close()
			_ = sub.Close()
			r.Stop()
			return nil, fmt.Errorf("firerecorder: subscribe on %s: %w", addr, err)
		}
		// READONLY lets a Cluster replica answer reads of its master's
		// slots; a standalone server refuses it, which changes nothing.
		quick := &redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: 500 * time.Millisecond,
			WriteTimeout: 500 * time.Millisecond, DialTimeout: 500 * time.Millisecond, PoolSize: 1,
			OnConnect: func(ctx context.Context, cn *redis.Conn) error { _ = cn.ReadOnly(ctx).Err(); return nil }}
		get := redis.NewClient(quick)
		woken := make(chan string, 100000)
		r.wg.Go(func() {
			defer sub.Close()
			defer ps.Close()
			defer close(woken)
			r.listen(rctx, ps, woken)
		})
		r.wg.Go(func() {
			defer get.Close()
			r.readRecords(rctx, addr, get, woken)
		})
		poll := redis.NewClient(quick)
		r.wg.Go(func() {
			defer poll.Close()
			r.poll(rctx, addr, poll)
		})
	}
	return r, nil
}

// listen counts wakeups, "fired" on a timer channel, and hands their
// timers to readRecords.
func (r *Recorder) listen(ctx context.Context, ps *redis.PubSub, woken chan<- string) {
	ch := ps.Channel(redis.WithChannelSize(100000))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			if m.Payload != "fired" {
				continue
			}
			_, id, ok := strings.Cut(m.Channel, "}:t:")
			if !ok {
				continue
			}
			now := time.Now()
			r.mu.Lock()
			r.wakeups[id]++
			if _, ok := r.woke[id]; !ok {
				r.woke[id] = now
			}
			r.mu.Unlock()
			select {
			case woken <- id:
			default: // the stream polls still see the fire
			}
		}
	}
}

// readRecords reads, on one node, the record of each timer whose wakeup
// that node delivered, and records its fire. A node that does not serve
// the timer's slot answers MOVED, which is ignored.
func (r *Recorder) readRecords(ctx context.Context, addr string, c *redis.Client, woken <-chan string) {
	for id := range woken {
		if ctx.Err() != nil {
			continue // drain
		}
		sp := keyspace.Shard(r.opts.Namespace, keyspace.ShardOf(id, r.opts.Shards), r.opts.Shards)
		rec, err := c.HGet(ctx, sp.Timers(), id).Result()
		if err != nil || !strings.HasPrefix(rec, "f:") {
			continue
		}
		// f:<due_ms>:<created_ms>:<fired_ms>:<payload>
		f := strings.SplitN(rec, ":", 5)
		if len(f) < 5 {
			continue
		}
		due, _ := strconv.ParseInt(f[1], 10, 64)
		fired, _ := strconv.ParseInt(f[3], 10, 64)
		r.mu.Lock()
		r.add(Event{Timer: id, Due: due, Fired: fired, Node: addr, Seen: time.Now()})
		r.mu.Unlock()
	}
}

// poll reads each shard's stream on one node, every Interval, from just
// after the last entry it read there. A node's stream is only appended to
// while it serves, and replaced wholesale when it resyncs from a new
// master, whose own stream this Recorder reads on that master; so
// reading on from the last entry misses nothing a client of either could
// read between two polls.
func (r *Recorder) poll(ctx context.Context, addr string, c *redis.Client) {
	spaces := keyspace.Shards(r.opts.Namespace, r.opts.Shards)
	last := make([]string, len(spaces))
	tick := time.NewTicker(r.opts.Interval)
	defer tick.Stop()
	for {
		cmds, _ := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for k, sp := range spaces {
				from := "-"
				if last[k] != "" {
					from = "(" + last[k]
				}
				p.XRange(ctx, sp.Fires(), from, "+")
			}
			return nil
		})
		now := time.Now()
		r.mu.Lock()
		for k, cmd := range cmds {
			msgs, err := cmd.(*redis.XMessageSliceCmd).Result()
			if err != nil {
				if ctx.Err() == nil {
					r.errs[addr]++
				}
				continue
			}
			for _, m := range msgs {
				last[k] = m.ID
				r.record(addr, now, m)
			}
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// record adds one stream entry. Callers hold r.mu.
func (r *Recorder) record(addr string, now time.Time, m redis.XMessage) {
	id, _ := m.Values["id"].(string)
	due, _ := strconv.ParseInt(fmt.Sprint(m.Values["due"]), 10, 64)
	fired, _ := strconv.ParseInt(fmt.Sprint(m.Values["fired"]), 10, 64)
	r.add(Event{Timer: id, EntryID: m.ID, Due: due, Fired: fired, Node: addr, Seen: now})
}

// add adds e unless it is an event already known: the same fired time and
// the same entry ID, or an entry ID on one side only. Callers hold r.mu.
func (r *Recorder) add(e Event) {
	evs := r.events[e.Timer]
	for i, k := range evs {
		if k.Fired == e.Fired && (k.EntryID == e.EntryID || k.EntryID == "" || e.EntryID == "") {
			if k.EntryID == "" {
				evs[i].EntryID = e.EntryID
			}
			return
		}
	}
	r.events[e.Timer] = append(evs, e)
}

// Stop stops recording, waits for its goroutines and returns what it saw.
func (r *Recorder) Stop() Report {
	r.cancel()
	r.wg.Wait()
	return r.Snapshot()
}

// Snapshot returns what the Recorder saw so far.
func (r *Recorder) Snapshot() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := Report{Events: map[string][]Event{}, Wakeups: maps.Clone(r.wakeups), FirstWakeup: maps.Clone(r.woke),
		PollErrors: maps.Clone(r.errs)}
	for k, v := range r.events {
		rep.Events[k] = slices.Clone(v)
	}
	return rep
}

// Report is what a Recorder saw.
type Report struct {
	// Events are the distinct fire events of each timer.
	Events map[string][]Event
	// Wakeups counts the "fired" messages heard per timer, over all nodes
	// (classic pub/sub reaches every node of a Cluster, so one publish is
	// heard once per node).
	Wakeups map[string]int
	// FirstWakeup is when the first was heard.
	FirstWakeup map[string]time.Time
	// PollErrors counts failed stream reads per node (a stopped node).
	PollErrors map[string]int
}

// Twice returns the timers seen fired as two or more distinct events,
// sorted, each as "id: entryID@fired on node, ...".
func (rep Report) Twice() []string {
	var out []string
	for id, evs := range rep.Events {
		if len(evs) < 2 {
			continue
		}
		parts := make([]string, len(evs))
		for i, e := range evs {
			parts[i] = fmt.Sprintf("%s@%d on %s", e.EntryID, e.Fired, e.Node)
		}
		out = append(out, id+": "+strings.Join(parts, ", "))
	}
	slices.Sort(out)
	return out
}

// Early returns the timers with an event fired before its due time.
func (rep Report) Early() []string {
	var out []string
	for id, evs := range rep.Events {
		for _, e := range evs {
			if e.Fired < e.Due {
				out = append(out, fmt.Sprintf("%s: fired %d, due %d", id, e.Fired, e.Due))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Missing returns those of ids that no event shows fired.
func (rep Report) Missing(ids []string) []string {
	var out []string
	for _, id := range ids {
		if len(rep.Events[id]) == 0 {
			out = append(out, id)
		}
	}
	return out
}
