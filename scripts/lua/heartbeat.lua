-- heartbeat.lua: renew (or end) a worker's membership of a namespace and
-- list the live members, by the Redis clock.
--
-- KEYS[1] workers: ZSET member = worker ID, score = expiry in server ms
-- KEYS[2] workers-seen: HASH at = this heartbeat's server ms, worker = ID,
--         left = '1' if the worker left, else '0'
-- KEYS[3] meta: HASH shards, replicas (keyspace.Namespace.Meta), read only
-- ARGV[1] worker ID
-- ARGV[2] ttl_ms: how long the membership lasts without another heartbeat
-- ARGV[3] '1' to leave (remove the worker), '0' to stay
-- Reply: {now_ms, shards or '', replicas or '', member_1, member_2, ...}:
--        the meta key's fields ('' when unset), so that a worker follows a
--        namespace created or given a replicas setting after it started
--        without reading the key apart, and the live members, sorted.
-- Complexity: O(log W + W) for W workers.
--
-- The workers share the namespace's shards by rendezvous hashing over this
-- list; a worker that stops heartbeating drops out after ttl_ms and its
-- shards go to the others. Ownership only saves work: claims stay atomic
-- per shard, so two workers that both think they own a shard are still
-- exactly once. workers-seen outlives the membership, so `timerctl stats`
-- can say when the namespace last had a worker once none is left.
--
-- It runs in the three phases of includes/probe.lua: the HSET is probed first, as the
-- one command Redis may refuse under OOM, and the closing ZRANGE is probed
-- too (read_probe), so that a refusal changes nothing.
local err = check_type(KEYS[1], 'zset') or check_type(KEYS[2], 'hash') or check_type(KEYS[3], 'hash')
if err then return err end
local now = now_ms()
local meta = redis.call('HMGET', KEYS[3], 'shards', 'replicas')
local leave = ARGV[3] == '1'
local _, rerr = read_probe('ZRANGE', KEYS[1], 0, 0)
if rerr then return rerr end
err = probe_all({{'HSET', KEYS[2]}, {leave and 'ZREM' or 'ZADD', KEYS[1]}, {'ZREMRANGEBYSCORE', KEYS[1]}})
if err then return err end
redis.call('HSET', KEYS[2], 'at', fmt(now), 'worker', ARGV[1], 'left', ARGV[3])
if leave then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], fmt(now + tonumber(ARGV[2])), ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local reply = {fmt(now), meta[1] or '', meta[2] or ''}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do reply[#reply + 1] = m end
return reply
