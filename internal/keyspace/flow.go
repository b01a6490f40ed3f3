package keyspace

// Flow control (queue's flow policies, scripts/lua/flow_*.lua) keeps, per
// consumer group and per flow, one key in the flow's home shard
// (FlowHome), and two in every shard whose fires wait for it:
//
//   - FlowState: a sorted set of the flow's deliveries under way, member =
//     "<shard>-<stream entry ID>", score = the Redis time (ms) its lease
//     ends, so a crashed consumer's slot frees itself when the lease does;
//     and the member "" whose score is the flow's GCRA theoretical arrival
//     time (ms). It expires once both are in the past, so an idle flow
//     costs nothing;
//   - FlowReady: a sorted set of the flows that have fires parked in the
//     shard, score = the Redis time (ms) the flow may next be tried;
//   - FlowParked: a sorted set of the parked fires themselves, all score
//     0, member = "<flow>\0<padded stream entry ID>\0<attempt>", so that a
//     flow's parked fires are one lexical range, oldest first.
//
// A flow is "<scope>:<key>": scope is the endpoint whose policy applies,
// "" for the namespace's; key is the timer's flow key. Endpoint names have
// no ':', so the first ':' splits it.

// FlowID is the flow of a policy scope (an endpoint name, "" for the
// namespace) and a flow key.
func FlowID(scope, key string) string { return scope + ":" + key }

// FlowHome is the shard that keeps the rate and in-flight state of flow
// in a namespace of shards shards: every delivery of the flow, from any
// shard, is counted there, so its limits hold across the namespace.
func FlowHome(flow string, shards int) int { return HashShard("flow\x00"+flow, shards) }

// FlowPolicies is the hash of the namespace's flow policies: field
// "<scope>:<key>" ("<scope>:" for the scope's default) -> "<rate>
// <period ms> <max in flight>".
func (ns Namespace) FlowPolicies() string { return ns.key("flow-policies") }

// FlowState is the rate and in-flight state of flow for consumer group
// group; it lives in the flow's home shard (FlowHome).
func (s Space) FlowState(group, flow string) string { return s.tag + "flow:" + group + "/" + flow }

// FlowReady is the set of flows with fires of group parked in the shard,
// by the Redis time they may next be tried.
func (s Space) FlowReady(group string) string { return s.tag + "flow-ready:" + group }

// FlowHint is the hash of how many parked fires of a flow (field) of
// group flow_pop.lua takes at once when the flow is next tried: what its
// rate allows in one millisecond, or one for a flow waiting for a slot.
// A flow without a field was last served, not held back.
func (s Space) FlowHint(group string) string { return s.tag + "flow-hint:" + group }

// FlowParked is the set of the shard's fires of group parked by flow
// control, ordered by flow, then by stream entry.
func (s Space) FlowParked(group string) string { return s.tag + "flow-parked:" + group }

// WakeGroup is the consumer group of the fire streams in which blocked
// Lease calls of group wait for new fires (queue's awaitFires): reading
// with NOACK, it hands each new entry to one waiter, where a plain XREAD
// would wake them all. A user's group name cannot hold '/', so no user
// group is named so; listings of the namespace's groups leave these out.
func WakeGroup(group string) string { return WakeGroupPrefix + group }

// WakeGroupPrefix starts the name of every WakeGroup.
const WakeGroupPrefix = "wake/"

// WakeConsumer is the one consumer name every waiter of a WakeGroup
// reads as: with NOACK nothing is pending for it, and one name keeps the
// group from collecting a consumer per caller.
const WakeConsumer = "w"
