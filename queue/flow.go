package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/sleep"
	"github.com/timerq/timerq/scripts/lua"
)

// Flow control: a timer may carry a flow key (NewTimer.FlowKey), a
// tenant's ID say, and a flow policy (Flows.PutPolicy) bounds the delivery
// of the fires of each key: a rate (Rate per Period) and a most in flight
// (MaxInFlight), per consumer group. The fire itself is never delayed: it
// fires at its due time, with its state, stream entry and wakeup, and only
// its handing out by Lease waits.
//
// Lease asks, for each fire with a flow key under a policy, the flow's
// state in its home shard (keyspace.FlowHome; flow_take.lua) for a slot.
// A fire the flow has no slot for now is parked in its own shard
// (flow_park.lua): acknowledged in the group and kept in the shard's
// parked set, under its flow, until the flow may be tried again; Lease
// takes parked fires back first (flow_pop.lua), round-robin across the
// flows that are ready. See docs/delivery.md#flow-control.

// Limits of flow keys and policies.
const (
	// MaxFlowKeyBytes is the longest flow key.
	MaxFlowKeyBytes = 128
	// MinFlowPeriod and MaxFlowPeriod bound FlowPolicy.Period.
	MinFlowPeriod = time.Millisecond
	MaxFlowPeriod = 24 * time.Hour
	// MaxFlowRate is the largest FlowPolicy.Rate.
	MaxFlowRate = 1_000_000
	// MaxFlowInFlight is the largest FlowPolicy.MaxInFlight.
	MaxFlowInFlight = 1_000_000
	// flowPolicyTTL is how long a Queue keeps the policies it read.
	flowPolicyTTL = time.Second
)

// ErrInvalidFlowPolicy means a flow policy or flow key was refused: a rate
// or period that is zero, negative or out of bounds, a bad endpoint name
// or key. Nothing was written. It wraps ErrInvalidOptions.
var ErrInvalidFlowPolicy = fmt.Errorf("%w: invalid flow policy", ErrInvalidOptions)

// FlowPolicy bounds the delivery of the fires of one flow key, or of every
// key without a policy of its own.
type FlowPolicy struct {
	// Endpoint, when set, makes the policy one of that endpoint's: it
	// applies to the fires of timers that deliver to it
	// (NewTimer.Endpoint), before any namespace policy. "" is a policy of
	// the namespace, for every fire.
	Endpoint string
	// Key is the flow key the policy is for; "" makes it the default of
	// its scope (the endpoint, or the namespace) for keys without a
	// policy of their own. Each key is limited on its own: a default
	// policy of 10 a second lets every key have 10 a second.
	Key string
	// Rate is how many deliveries of one key may start per Period, paced
	// evenly (one every Period/Rate): 1..MaxFlowRate.
	Rate int
	// Period is the rate's period: MinFlowPeriod..MaxFlowPeriod, in whole
	// milliseconds.
	Period time.Duration
	// MaxInFlight is how many deliveries of one key may be under way at
	// once, handed out and not yet acknowledged or released (a delivery
	// whose consumer died frees its slot when its lease runs out): 0 for
	// no bound, at most MaxFlowInFlight.
	MaxInFlight int
}

// ValidateFlowKey checks a flow key: 1 to MaxFlowKeyBytes of UTF-8
// without control characters. The error wraps ErrInvalidFlowPolicy.
func ValidateFlowKey(key string) error {
	const want = "use 1-128 bytes of UTF-8 without control characters"
	switch {
	case key == "" || len(key) > MaxFlowKeyBytes:
		return fmt.Errorf("%w: flow key %q is %d bytes long; %s", ErrInvalidFlowPolicy, key, len(key), want)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: flow key %q is not valid UTF-8; %s", ErrInvalidFlowPolicy, key, want)
	}
	for i, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: flow key %q has a control character at byte %d; %s", ErrInvalidFlowPolicy, key, i, want)
		}
	}
	return nil
}

// ValidateFlowPolicy checks p as Flows.PutPolicy does, without Redis. The
// error wraps ErrInvalidFlowPolicy and says what to change.
func ValidateFlowPolicy(p FlowPolicy) error {
	if p.Endpoint != "" {
		if err := ValidateEndpointName(p.Endpoint); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidFlowPolicy, err)
		}
	}
	if p.Key != "" {
		if err := ValidateFlowKey(p.Key); err != nil {
			return err
		}
	}
	if p.Rate < 1 || p.Rate > MaxFlowRate {
		return fmt.Errorf("%w: rate %d is outside 1..%d; give how many deliveries of one key may start per period",
			ErrInvalidFlowPolicy, p.Rate, MaxFlowRate)
	}
	if p.Period < MinFlowPeriod || p.Period > MaxFlowPeriod || p.Period%time.Millisecond != 0 {
		return fmt.Errorf("%w: period %v is outside %v..%v or not whole milliseconds; use a period such as 1s or 1m",
			ErrInvalidFlowPolicy, p.Period, MinFlowPeriod, MaxFlowPeriod)
	}
	if p.MaxInFlight < 0 || p.MaxInFlight > MaxFlowInFlight {
		return fmt.Errorf("%w: max in flight %d is outside 0..%d; use 0 for no bound",
			ErrInvalidFlowPolicy, p.MaxInFlight, MaxFlowInFlight)
	}
	return nil
}

// validFlowID reports whether s is a flow "<endpoint>:<key>" that a
// delivery ID may carry.
func validFlowID(s string) bool {
	ep, key, ok := strings.Cut(s, ":")
	return ok && (ep == "" || ValidateEndpointName(ep) == nil) && ValidateFlowKey(key) == nil
}

func (p FlowPolicy) field() string { return keyspace.FlowID(p.Endpoint, p.Key) }

func (p FlowPolicy) value() string {
	return fmt.Sprintf("%d %d %d", p.Rate, p.Period.Milliseconds(), p.MaxInFlight)
}

func parseFlowPolicy(field, value string) (FlowPolicy, error) {
	ep, key, _ := strings.Cut(field, ":")
	p := FlowPolicy{Endpoint: ep, Key: key}
	var ms int64
	if _, err := fmt.Sscanf(value, "%d %d %d", &p.Rate, &ms, &p.MaxInFlight); err != nil {
		return p, fmt.Errorf("%w: flow policy %q is stored as %q, which is not '<rate> <period ms> <max in flight>'; put it again",
			ErrMalformedRecord, field, value)
	}
	p.Period = time.Duration(ms) * time.Millisecond
	if err := ValidateFlowPolicy(p); err != nil {
		return p, fmt.Errorf("%w: flow policy %q: %w", ErrMalformedRecord, field, err)
	}
	return p, nil
}

// PutPolicy creates or replaces the flow policy of p.Endpoint and
// p.Key. A policy that ValidateFlowPolicy refuses gives an error wrapping
// ErrInvalidFlowPolicy, and nothing is written. Every Lease of the
// namespace applies it within a second (each Queue reads the policies at
// most once a second); deliveries already handed out keep their slots.
// One round trip.
func (f Flows) PutPolicy(ctx context.Context, p FlowPolicy) error {
	q := f.q
	if err := ValidateFlowPolicy(p); err != nil {
		return err
	}
	if err := q.rdb.HSet(ctx, keyspace.Namespace(q.opts.Namespace).FlowPolicies(), p.field(), p.value()).Err(); err != nil {
		return errorf("put flow policy %q: %w", p.field(), q.redisError(err))
	}
	q.flow.forget()
	return nil
}

// DeletePolicy deletes the flow policy of endpoint ("" for the
// namespace's) and key ("" for the default), and reports whether there was
// one. The flow's parked fires are still handed out, under the policy
// that applies now (none: at once). One round trip.
func (f Flows) DeletePolicy(ctx context.Context, endpoint, key string) (bool, error) {
	q := f.q
	// The scope and key checked as a policy's, with a valid rate.
	if err := ValidateFlowPolicy(FlowPolicy{Endpoint: endpoint, Key: key, Rate: 1, Period: time.Second}); err != nil {
		return false, err
	}
	n, err := q.rdb.HDel(ctx, keyspace.Namespace(q.opts.Namespace).FlowPolicies(), keyspace.FlowID(endpoint, key)).Result()
	if err != nil {
		return false, errorf("delete flow policy %q: %w", keyspace.FlowID(endpoint, key), q.redisError(err))
	}
	q.flow.forget()
	return n > 0, nil
}

// Policies returns the namespace's flow policies, the namespace's
// first, then by endpoint and key. One round trip.
func (f Flows) Policies(ctx context.Context) ([]FlowPolicy, error) {
	q := f.q
	m, err := q.readFlowPolicies(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]FlowPolicy, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b FlowPolicy) int {
		if c := strings.Compare(a.Endpoint, b.Endpoint); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, nil
}

func (q *Queue) readFlowPolicies(ctx context.Context) (map[string]FlowPolicy, error) {
	raw, err := q.rdb.HGetAll(ctx, keyspace.Namespace(q.opts.Namespace).FlowPolicies()).Result()
	if err != nil {
		return nil, errorf("read flow policies: %w", q.redisError(err))
	}
	m := make(map[string]FlowPolicy, len(raw))
	for f, v := range raw {
		p, err := parseFlowPolicy(f, v)
		if err != nil {
			return nil, err
		}
		m[f] = p
	}
	return m, nil
}

// flowCache keeps a Queue's copy of its namespace's flow policies.
type flowCache struct {
	mu sync.Mutex
	at time.Time
	m  map[string]FlowPolicy
}

func (c *flowCache) forget() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

// flowPolicies returns the namespace's policies, read at most once per
// flowPolicyTTL; fresh reports that they were read by this call.
func (q *Queue) flowPolicies(ctx context.Context) (_ map[string]FlowPolicy, fresh bool, _ error) {
	c := &q.flow
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < flowPolicyTTL {
		return c.m, false, nil
	}
	m, err := q.readFlowPolicies(ctx)
	if errors.Is(err, ErrPermission) {
		// A Redis user without +hgetall (an ACL line from before flow
		// control, docs/security.md) leases as before, without flow
		// control, rather than not at all.
		m, err = map[string]FlowPolicy{}, nil
	}
	if err != nil {
		return nil, false, err
	}
	c.m, c.at = m, time.Now()
	return m, true, nil
}

// policyFor returns the flow of ev and the policy that applies to it: the
// endpoint's policy for the key, the endpoint's default, the namespace's
// policy for the key, the namespace's default, in that order. ok is false
// for a fire without a flow key or without a policy.
func policyFor(m map[string]FlowPolicy, ev Event) (flow string, p FlowPolicy, ok bool) {
	if ev.FlowKey == "" || len(m) == 0 {
		return "", p, false
	}
	scopes := []string{""}
	if ev.Endpoint != "" {
		scopes = []string{ev.Endpoint, ""}
	}
	for _, s := range scopes {
		if p, ok := m[keyspace.FlowID(s, ev.FlowKey)]; ok {
			return keyspace.FlowID(s, ev.FlowKey), p, true
		}
		if p, ok := m[keyspace.FlowID(s, "")]; ok {
			return keyspace.FlowID(s, ev.FlowKey), p, true
		}
	}
	return "", p, false
}

// deliveryArg is what schedule.lua keeps of t's delivery (deliveryOf).
func (t NewTimer) deliveryArg() string { return deliveryOf(t.Endpoint, t.URL, t.FlowKey) }

// deliveryOf is what the scripts keep of a delivery in a shard's
// deliveries hash: the endpoint and its URL (deliverArg), then "\x00" and
// the flow key when there is one; claim.lua splits the flow key off into
// the fire entry's field flow. A flow key holds no control character
// (ValidateFlowKey), nor an endpoint name or URL (ValidateTimerURL) a
// NUL, so the first NUL splits them. Without a flow key the value is as
// before flow control, so a timer without one costs nothing more.
func deliveryOf(endpoint, url, flowKey string) string {
	if flowKey == "" {
		return deliverArg(endpoint, url)
	}
	return deliverArg(endpoint, url) + "\x00" + flowKey
}

// leaseRound is one round of Lease: leaseOnce, under the namespace's flow
// policies if it has any. wait, when positive, is how soon a parked fire
// may be handed out: Lease waits no longer than that.
func (q *Queue) leaseRound(ctx context.Context, l *layout, group, consumer string, opts LeaseOptions) (out []Delivery, last []string, wait time.Duration, _ error) {
	pols, reread, err := q.flowPolicies(ctx)
	if err != nil {
		return nil, nil, 0, errorf("lease %s/%s: %w", group, consumer, err)
	}
	if len(pols) == 0 && !reread {
		// No policy: nothing is parked, but for fires parked under
		// policies deleted since, which the round after each reading of
		// the policies (once a second) hands out.
		out, last, err := q.leaseOnce(ctx, l, group, consumer, opts)
		return out, last, 0, err
	}
	popped, wait, err := q.flowPop(ctx, l, group, consumer, opts)
	if err != nil {
		return nil, nil, 0, errorf("lease %s/%s: %w", group, consumer, err)
	}
	if len(pols) == 0 && len(popped) == 0 {
		out, last, err := q.leaseOnce(ctx, l, group, consumer, opts)
		return out, last, wait, err
	}
	var fresh []Delivery
	if left := opts.Count - len(popped); left > 0 {
		o := opts
		o.Count = left
		if fresh, last, err = q.leaseOnce(ctx, l, group, consumer, o); err != nil {
			return nil, nil, 0, err
		}
	}
	all := append(popped, fresh...)
	if len(all) == 0 {
		return nil, last, wait, nil
	}
	out, err = q.flowAdmit(ctx, l, group, consumer, opts, pols, all)
	if err != nil {
		return nil, nil, 0, errorf("lease %s/%s: %w", group, consumer, err)
	}
	return out, nil, wait, nil
}

// blockGrain is the precision of a blocking read's timeout on a Redis
// server: it checks them on its timer (hz 10 by default), so a BLOCK of
// 10 ms may last 100.
const blockGrain = 100 * time.Millisecond

// awaitParked waits d, until a parked fire may be handed out: with a
// blocking read for new fires for all but the last blockGrain of it, then
// a sleep, so that the wait ends on time. It reports whether ctx is live.
func (q *Queue) awaitParked(ctx context.Context, l *layout, group string, last []string, count int, d time.Duration) bool {
	if d > blockGrain+leasePoll/10 && last != nil {
		if err := q.awaitFires(ctx, l, group, last, count, min(d-blockGrain, leasePoll)); err != nil {
			return ctx.Err() == nil // a failed wait: the next round reports it
		}
		return ctx.Err() == nil
	}
	return sleep.For(ctx, d)
}

// flowPop takes back, from every shard, parked fires of group whose flows
// may be tried again, leased to consumer. wait is how long until the
// earliest flow still parked may be tried (0: none parked).
func (q *Queue) flowPop(ctx context.Context, l *layout, group, consumer string, opts LeaseOptions) ([]Delivery, time.Duration, error) {
	n := len(l.spaces)
	quota := (opts.Count + n - 1) / n
	calls := make([]call, n)
	for k := range calls {
		calls[k] = call{shard: k, keys: lua.FlowPop.Keys(l.spaces[k], group), args: []any{group, consumer, quota}}
	}
	asked := time.Now()
	replies, err := q.runMany(ctx, l, lua.FlowPop, calls)
	if err != nil {
		return nil, 0, fmt.Errorf("taking back parked fires: %w", err)
	}
	var out []Delivery
	wait := time.Duration(0)
	for k, reply := range replies {
		// next is when the shard's earliest parked fire is ready, whether
		// or not leaseReply dead-lettered some of those it took.
		got, next, _, err := q.leaseReply(ctx, l, group, k, reply, opts, asked)
		if err != nil {
			return nil, 0, fmt.Errorf("taking back parked fires: %w", err)
		}
		out = append(out, got...)
		if next == "" {
			continue
		}
		nowMs, _ := strconv.ParseInt(fmt.Sprint(reply.([]any)[0]), 10, 64)
		at, err := strconv.ParseFloat(next, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("taking back parked fires: unexpected next %q from shard %d", next, k)
		}
		w := max(time.Duration(math.Ceil(at)-float64(nowMs))*time.Millisecond, time.Millisecond)
		if wait == 0 || w < wait {
			wait = w
		}
	}
	return out, wait, nil
}

// flowAdmit asks the flows of ds for slots, parks the deliveries that get
// none, and returns the others, in their order, those under a policy with
// delivery IDs that name their flow.
func (q *Queue) flowAdmit(ctx context.Context, l *layout, group, consumer string, opts LeaseOptions, pols map[string]FlowPolicy, ds []Delivery) ([]Delivery, error) {
	type flowReq struct {
		flow string
		pol  FlowPolicy
		idx  []int // deliveries of ds, in order
	}
	var flows []*flowReq
	byFlow := map[string]*flowReq{}
	for i, d := range ds {
		flow, pol, ok := policyFor(pols, d.Event)
		if !ok {
			continue
		}
		r := byFlow[flow]
		if r == nil {
			r = &flowReq{flow: flow, pol: pol}
			byFlow[flow] = r
			flows = append(flows, r)
		}
		r.idx = append(r.idx, i)
	}
	if len(flows) == 0 {
		return ds, nil
	}
	// One flow_take per home shard, all in one pipeline.
	n := len(l.spaces)
	byHome := map[int]int{}
	var calls []call
	var members [][]*flowReq
	for _, r := range flows {
		h := keyspace.FlowHome(r.flow, n)
		c, ok := byHome[h]
		if !ok {
			c = len(calls)
			byHome[h] = c
			calls = append(calls, call{shard: h, keys: []string{}, args: []any{opts.Lease.Milliseconds()}})
			members = append(members, nil)
		}
		calls[c].keys = append(calls[c].keys, l.spaces[h].FlowState(group, r.flow))
		calls[c].args = append(calls[c].args, r.pol.Rate, r.pol.Period.Milliseconds(), r.pol.MaxInFlight, len(r.idx))
		for _, i := range r.idx {
			calls[c].args = append(calls[c].args, flowMember(ds[i]))
		}
		members[c] = append(members[c], r)
	}
	replies, err := q.runMany(ctx, l, lua.FlowTake, calls)
	if err != nil {
		return nil, fmt.Errorf("flow control: %w", err)
	}
	parked := make([]bool, len(ds))
	type parkFlow struct {
		flow, next string
		hint       int
		idx        []int
	}
	parks := map[int][]parkFlow{} // stream shard -> flows to park there
	for c, reply := range replies {
		v, err := replyStrings(reply)
		if err != nil || len(v) != 1+2*len(members[c]) {
			return nil, fmt.Errorf("flow control: unexpected reply %v", reply)
		}
		for j, r := range members[c] {
			g, _ := strconv.Atoi(v[1+2*j])
			for x, i := range r.idx {
				if x < g {
					ref, _ := ParseDeliveryID(ds[i].DeliveryID)
					ref.Flow = r.flow
					ds[i].DeliveryID = ref.String()
					continue
				}
				parked[i] = true
				k := ds[i].Event.Shard
				pf := parks[k]
				if len(pf) == 0 || pf[len(pf)-1].flow != r.flow {
					pf = append(pf, parkFlow{flow: r.flow, next: v[2+2*j], hint: flowHint(r.pol)})
				}
				pf[len(pf)-1].idx = append(pf[len(pf)-1].idx, i)
				parks[k] = pf
			}
		}
	}
	if len(parks) > 0 {
		var pcalls []call
		for k, pfs := range parks {
			args := []any{group, consumer}
			for _, pf := range pfs {
				args = append(args, pf.flow, pf.next, pf.hint, len(pf.idx))
				for _, i := range pf.idx {
					args = append(args, ds[i].Event.StreamID, ds[i].Event.Attempt)
				}
			}
			pcalls = append(pcalls, call{shard: k, keys: lua.FlowPark.Keys(l.spaces[k], group), args: args})
		}
		if _, err := q.runMany(ctx, l, lua.FlowPark, pcalls); err != nil {
			// Still leased: the deliveries come back when their leases run out.
			return nil, fmt.Errorf("flow control: parking fires: %w", err)
		}
	}
	out := ds[:0:0]
	for i, d := range ds {
		if !parked[i] {
			out = append(out, d)
		}
	}
	return out, nil
}

// flowHint is how many parked fires of a flow under policy p to take at
// once when it is next tried: what its rate allows in one millisecond,
// and no more than its in-flight bound.
func flowHint(p FlowPolicy) int {
	h := max(1, int(float64(p.Rate)/float64(p.Period.Milliseconds())))
	if p.MaxInFlight > 0 {
		h = min(h, p.MaxInFlight)
	}
	return h
}

// flowMember is d's member in its flow's state: "<shard>-<stream entry ID>".
func flowMember(d Delivery) string { return strconv.Itoa(d.Event.Shard) + "-" + d.Event.StreamID }

func refMember(r DeliveryRef) string { return strconv.Itoa(r.Shard) + "-" + r.StreamID }

// flowDone frees the in-flight slots of the settled deliveries refs that
// hold one, in one pipeline. A failure leaves a slot taken until its
// lease runs out: the limit errs on the safe side.
func (q *Queue) flowDone(ctx context.Context, l *layout, group string, refs ...DeliveryRef) error {
	var held []DeliveryRef
	for _, r := range refs {
		if r.Flow != "" {
			held = append(held, r)
		}
	}
	if len(held) == 0 {
		return nil
	}
	n := len(l.spaces)
	err := q.each(ctx, len(held), func(c redis.Cmdable, i int) redis.Cmder {
		r := held[i]
		return c.ZRem(ctx, l.spaces[keyspace.FlowHome(r.Flow, n)].FlowState(group, r.Flow), refMember(r))
	})
	if err != nil {
		return errorf("freeing flow slots: %w", q.redisError(err))
	}
	return nil
}

// flowExtend moves the end of r's in-flight slot to at, with its lease.
func (q *Queue) flowExtend(ctx context.Context, l *layout, group string, r DeliveryRef, at time.Time, opts LeaseOptions) error {
	if r.Flow == "" {
		return nil
	}
	key := l.spaces[keyspace.FlowHome(r.Flow, len(l.spaces))].FlowState(group, r.Flow)
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddXX(ctx, key, redis.Z{Score: float64(at.UnixMilli()), Member: refMember(r)})
		p.Do(ctx, "PEXPIRE", key, (opts.Lease + time.Second).Milliseconds(), "GT")
		return nil
	})
	if err != nil {
		return errorf("extending flow slot: %w", q.redisError(err))
	}
	return nil
}

// FlowStat is one flow's state in a consumer group (Flows.Stats).
type FlowStat struct {
	// Endpoint is the scope of the policy that applies ("" for the
	// namespace's); Key the flow key.
	Endpoint, Key string
	// Backlog is how many of the flow's fires are parked, waiting for the
	// flow's rate or slots.
	Backlog int64
	// InFlight is how many of its deliveries are under way now.
	InFlight int64
	// Policy is the policy that applies now; zero if none does.
	Policy FlowPolicy
}

// MaxFlowStats bounds the flows Flows.Stats reports.
const MaxFlowStats = 1000

// Stats reports the flows of group that have fires parked, up to
// limit (at most MaxFlowStats; 0 means MaxFlowStats), the largest backlog
// first: each flow's backlog, deliveries under way and policy. Flows
// without a backlog are not listed: their state is no more than their
// deliveries under way. Cost: per shard a pipeline of one read per flow
// with a backlog.
func (f Flows) Stats(ctx context.Context, group string, limit int) ([]FlowStat, error) {
	q := f.q
	if err := ValidateConsumerName("group", group); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxFlowStats {
		limit = MaxFlowStats
	}
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	pols, err := q.readFlowPolicies(ctx)
	if err != nil {
		return nil, err
	}
	backlog := map[string]int64{}
	for _, sp := range l.spaces {
		flows, err := q.rdb.ZRange(ctx, sp.FlowReady(group), 0, MaxFlowStats-1).Result()
		if err != nil {
			return nil, errorf("flow stats: %w", q.redisError(err))
		}
		if len(flows) == 0 {
			continue
		}
		cmds := make([]*redis.IntCmd, len(flows))
		if err := q.each(ctx, len(flows), func(c redis.Cmdable, i int) redis.Cmder {
			cmds[i] = c.ZLexCount(ctx, sp.FlowParked(group), "["+flows[i]+"\x00", "("+flows[i]+"\x01")
			return cmds[i]
		}); err != nil {
			return nil, errorf("flow stats: %w", q.redisError(err))
		}
		for i, f := range flows {
			backlog[f] += cmds[i].Val()
		}
	}
	out := make([]FlowStat, 0, len(backlog))
	for f, b := range backlog {
		ep, key, _ := strings.Cut(f, ":")
		st := FlowStat{Endpoint: ep, Key: key, Backlog: b}
		if _, p, ok := policyFor(pols, Event{Endpoint: ep, FlowKey: key}); ok {
			st.Policy = p
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b FlowStat) int {
		if a.Backlog != b.Backlog {
			if a.Backlog > b.Backlog {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Endpoint+":"+a.Key, b.Endpoint+":"+b.Key)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	if len(out) == 0 {
		return out, nil
	}
	now, err := q.rdb.Time(ctx).Result()
	if err != nil {
		return nil, errorf("flow stats: %w", q.redisError(err))
	}
	// Per flow: its live members, less the GCRA member "" when that is
	// live too.
	counts := make([]*redis.IntCmd, len(out))
	tats := make([]*redis.FloatCmd, len(out))
	nowMs := now.UnixMilli()
	if err := q.each(ctx, 2*len(out), func(c redis.Cmdable, j int) redis.Cmder {
		i := j / 2
		f := keyspace.FlowID(out[i].Endpoint, out[i].Key)
		key := l.spaces[keyspace.FlowHome(f, len(l.spaces))].FlowState(group, f)
		if j%2 == 0 {
			counts[i] = c.ZCount(ctx, key, "("+strconv.FormatInt(nowMs, 10), "+inf")
			return counts[i]
		}
		tats[i] = c.ZScore(ctx, key, "")
		return tats[i]
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, errorf("flow stats: %w", q.redisError(err))
	}
	for i := range out {
		out[i].InFlight = counts[i].Val()
		if tat, err := tats[i].Result(); err == nil && tat > float64(nowMs) {
			out[i].InFlight--
		}
	}
	return out, nil
}
