// Package shardsub subscribes to many pub/sub channels, classic or sharded,
// over as few connections as Redis allows: one for classic pub/sub and on a
// standalone server, and one per Cluster node for sharded pub/sub.
//
// Why not one go-redis PubSub per node for shard channels: go-redis v9.23
// remembers a PubSub's shard channels and, after a reconnect, resubscribes
// to all of them in a single SSUBSCRIBE (pubsub.go resubscribe). Redis
// refuses an SSUBSCRIBE whose channels span slots with CROSSSLOT, and
// PubSub.Channel swallows that error, leaving the connection silently
// subscribed to nothing. So each node's connection is read here with
// Receive, which returns the error, and on CROSSSLOT (or MOVED, or a
// "sunsubscribe" the application did not ask for, which Redis sends when a
// slot leaves the node) the connection is rebuilt with one SSUBSCRIBE per
// slot, each routed to the slot's current owner. A rebuild reports every
// channel as subscribed again, so callers re-read the state that messages
// lost in the gap would have announced.
package shardsub

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/sleep"
)

// Event is a message or a (re)subscription.
type Event struct {
	Channel string
	// Payload is the message; empty for a subscription.
	Payload string
	// Subscribed is true when the channel's subscription was confirmed or
	// renewed: messages sent before may have been missed.
	Subscribed bool
}

// Sub is a set of channel subscriptions. Its methods are safe for
// concurrent use.
type Sub struct {
	rdb     redis.UniversalClient
	cluster *redis.ClusterClient // nil unless sharded on a Cluster
	sharded bool
	events  chan Event
	ctx     context.Context // ends at Close
	stop    context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[string]*conn // by node address ("" when there is one)
	where  map[string]*conn // channel -> its connection
	closed bool

	// Rebuilds counts connections rebuilt after CROSSSLOT, MOVED or a slot
	// leaving a node.
	rebuilds int
}

type conn struct {
	addr string
	ps   *redis.PubSub
	chs  map[string]bool
}

// New returns an empty Sub. sharded selects SSUBSCRIBE over SUBSCRIBE.
func New(rdb redis.UniversalClient, sharded bool, buffer int) *Sub {
	s := &Sub{
		rdb: rdb, sharded: sharded, events: make(chan Event, buffer),
		conns: map[string]*conn{}, where: map[string]*conn{},
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	if cc, ok := rdb.(*redis.ClusterClient); ok && sharded {
		s.cluster = cc
	}
	return s
}

// Events delivers messages and subscriptions until Close.
func (s *Sub) Events() <-chan Event { return s.events }

// Conns returns how many pub/sub connections are open.
func (s *Sub) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Rebuilds returns how many connections were rebuilt.
func (s *Sub) Rebuilds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rebuilds
}

// Subscribe subscribes to channels; confirmations arrive as events. An
// error means some were not subscribed, and will be on the next rebuild.
func (s *Sub) Subscribe(ctx context.Context, channels ...string) error {
	groups, err := s.route(ctx, channels)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	var first error
	for addr, bySlot := range groups {
		c := s.connLocked(addr)
		for _, chs := range bySlot {
			for _, ch := range chs {
				c.chs[ch] = true
				s.where[ch] = c
			}
			if err := s.send(ctx, c.ps, true, chs); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// Unsubscribe drops channels. Once it returns, no message of theirs is
// delivered, though the server may still send some before it reads the
// unsubscribe.
func (s *Sub) Unsubscribe(ctx context.Context, channels ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bySlot := map[*conn]map[int][]string{}
	for _, ch := range channels {
		c := s.where[ch]
		if c == nil {
			continue
		}
		delete(s.where, ch)
		delete(c.chs, ch)
		if bySlot[c] == nil {
			bySlot[c] = map[int][]string{}
		}
		slot := keyspace.Slot(ch)
		bySlot[c][slot] = append(bySlot[c][slot], ch)
	}
	for c, m := range bySlot {
		for _, chs := range m {
			_ = s.send(ctx, c.ps, false, chs)
		}
	}
}

// route groups channels by node address and slot. Without a Cluster (or
// with classic pub/sub) everything goes to one connection, "".
func (s *Sub) route(ctx context.Context, channels []string) (map[string]map[int][]string, error) {
	out := map[string]map[int][]string{}
	add := func(addr string, slot int, ch string) {
		if out[addr] == nil {
			out[addr] = map[int][]string{}
		}
		out[addr][slot] = append(out[addr][slot], ch)
	}
	if s.cluster == nil {
		for _, ch := range channels {
			slot := 0
			if s.sharded {
				slot = keyspace.Slot(ch) // a standalone server takes any mix, but keep commands small
			}
			add("", slot, ch)
		}
		return out, nil
	}
	nodes := map[int]string{}
	for _, ch := range channels {
		slot := keyspace.Slot(ch)
		addr, ok := nodes[slot]
		if !ok {
			node, err := s.cluster.MasterForKey(ctx, ch)
			if err != nil {
				return nil, err
			}
			addr = node.Options().Addr
			nodes[slot] = addr
		}
		add(addr, slot, ch)
	}
	return out, nil
}

// connLocked returns the connection to addr, opening it.
func (s *Sub) connLocked(addr string) *conn {
	if c := s.conns[addr]; c != nil {
		return c
	}
	c := &conn{addr: addr, chs: map[string]bool{}}
	c.ps = s.newPubSub(addr)
	s.conns[addr] = c
	s.wg.Add(1)
	go s.receive(c, c.ps)
	return c
}

func (s *Sub) newPubSub(addr string) *redis.PubSub {
	ctx := context.Background()
	switch {
	case s.cluster != nil:
		// A client of that node, owned by the Cluster client: its PubSub
		// reconnects to the same node.
		if node, err := s.nodeClient(ctx, addr); err == nil {
			return node.SSubscribe(ctx)
		}
		return s.cluster.SSubscribe(ctx)
	case s.sharded:
		return s.rdb.SSubscribe(ctx)
	}
	return s.rdb.Subscribe(ctx)
}

func (s *Sub) nodeClient(ctx context.Context, addr string) (*redis.Client, error) {
	var found *redis.Client
	err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			found = c
		}
		return nil
	})
	if err == nil && found == nil {
		err = errors.New("node " + addr + " is not a master")
	}
	return found, err
}

func (s *Sub) send(ctx context.Context, ps *redis.PubSub, sub bool, chs []string) error {
	switch {
	case sub && s.sharded:
		return ps.SSubscribe(ctx, chs...)
	case sub:
		return ps.Subscribe(ctx, chs...)
	case s.sharded:
		return ps.SUnsubscribe(ctx, chs...)
	}
	return ps.Unsubscribe(ctx, chs...)
}

// receive reads one connection until it is closed.
func (s *Sub) receive(c *conn, ps *redis.PubSub) {
	defer s.wg.Done()
	ctx := context.Background()
	fails := 0
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) || s.isClosed() {
				return
			}
			var rerr redis.Error
			if errors.As(err, &rerr) && s.cluster != nil &&
				(strings.HasPrefix(rerr.Error(), "CROSSSLOT") || strings.HasPrefix(rerr.Error(), "MOVED") || strings.HasPrefix(rerr.Error(), "ASK")) {
				s.rebuild(c, ps)
				return
			}
			// A network error: go-redis reconnects and resubscribes on the
			// next Receive.
			fails++
			if !sleep.For(s.ctx, min(time.Duration(fails)*50*time.Millisecond, time.Second)) {
				return
			}
			continue
		}
		fails = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				s.emit(Event{Channel: m.Channel, Subscribed: true})
			case "sunsubscribe":
				// Redis drops shard channels whose slot left this node.
				s.mu.Lock()
				moved := s.where[m.Channel] == c
				s.mu.Unlock()
				if moved && s.cluster != nil {
					s.rebuild(c, ps)
					return
				}
			}
		case *redis.Message:
			// The server may send a message between Unsubscribe's return
			// and its reading the UNSUBSCRIBE: the caller wants none then.
			s.mu.Lock()
			_, ok := s.where[m.Channel]
			s.mu.Unlock()
			if ok {
				s.emit(Event{Channel: m.Channel, Payload: m.Payload})
			}
		}
	}
}

// rebuild replaces a node's connection: its channels are resubscribed slot
// by slot, each on the node that owns the slot now.
func (s *Sub) rebuild(c *conn, ps *redis.PubSub) {
	_ = ps.Close()
	ctx := context.Background()
	s.cluster.ReloadState(ctx)
	s.mu.Lock()
	if s.closed || s.conns[c.addr] != c {
		s.mu.Unlock()
		return
	}
	s.rebuilds++
	delete(s.conns, c.addr)
	var chs []string
	for ch := range c.chs {
		chs = append(chs, ch)
		delete(s.where, ch)
	}
	s.mu.Unlock()
	for attempt := 0; len(chs) > 0; attempt++ {
		if err := s.Subscribe(ctx, chs...); err == nil || !sleep.For(s.ctx, min(time.Duration(attempt+1)*100*time.Millisecond, time.Second)) {
			return
		}
	}
}

func (s *Sub) emit(e Event) {
	select {
	case s.events <- e:
	case <-s.ctx.Done():
	}
}

func (s *Sub) isClosed() bool {
	select {
	case <-s.ctx.Done():
		return true
	default:
		return false
	}
}

// Close closes every connection and waits for the readers; Events is then
// closed.
func (s *Sub) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.stop()
	for _, c := range s.conns {
		_ = c.ps.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	close(s.events)
	return nil
}
