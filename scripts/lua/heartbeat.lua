-- heartbeat.lua: renew (or end) a worker's membership of a namespace and
-- list the live members, by the Redis clock.
--
-- KEYS[1] workers: ZSET member = worker ID, score = expiry in server ms
-- ARGV[1] worker ID
-- ARGV[2] ttl_ms: how long the membership lasts without another heartbeat
-- ARGV[3] '1' to leave (remove the worker), '0' to stay
-- Reply: {now_ms, member_1, member_2, ...}: the live members, sorted.
-- Complexity: O(log W + W) for W workers.
--
-- The workers share the namespace's shards by rendezvous hashing over this
-- list; a worker that stops heartbeating drops out after ttl_ms and its
-- shards go to the others. Ownership only saves work: claims stay atomic
-- per shard, so two workers that both think they own a shard are still
-- exactly once. The ZADD, the only command that may be refused (OOM),
-- runs before the removal, so a refusal changes nothing.
local t = redis.call('TYPE', KEYS[1])
if type(t) == 'table' then t = t['ok'] end
if t ~= 'none' and t ~= 'zset' then
  return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' .. t .. ' where timerq keeps a zset')
end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local reply = {string.format('%.0f', now)}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do reply[#reply + 1] = m end
return reply
