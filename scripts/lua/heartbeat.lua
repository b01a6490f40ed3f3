-- heartbeat.lua: renew (or end) a worker's membership of a namespace and
-- list the live members, by the Redis clock.
--
-- KEYS[1] workers: ZSET member = worker ID, score = expiry in server ms
-- KEYS[2] workers-seen: HASH at = this heartbeat's server ms, worker = ID,
--         left = '1' if the worker left, else '0'
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
-- exactly once. workers-seen outlives the membership, so `timerctl stats`
-- can say when the namespace last had a worker once none is left.
--
-- The HSET runs first: it is the one command Redis may refuse (OOM), and
-- once a script has written Redis lets it finish, so a refusal changes
-- nothing.
local function check(key, want)
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then t = t['ok'] end
  if t ~= 'none' and t ~= want then
    return redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. t .. ' where timerq keeps a ' .. want)
  end
end
local err = check(KEYS[1], 'zset') or check(KEYS[2], 'hash')
if err then return err end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
redis.call('HSET', KEYS[2], 'at', string.format('%.0f', now), 'worker', ARGV[1], 'left', ARGV[3])
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local reply = {string.format('%.0f', now)}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do reply[#reply + 1] = m end
return reply
