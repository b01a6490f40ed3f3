-- workers.lua: the namespace's live workers and its latest heartbeat, by
-- the Redis clock, changing nothing.
--
-- KEYS[1] workers: ZSET member = worker ID, score = expiry in server ms
-- KEYS[2] workers-seen: HASH at, worker, left (see heartbeat.lua)
-- ARGV: none.
-- Reply: {now_ms, seen_at_ms or '', seen_worker or '', seen_left '1'|'0'|'',
--         member_1, expiry_ms_1, member_2, expiry_ms_2, ...}: the members
--         whose membership has not expired, by worker ID.
-- Complexity: O(W) for W workers.
local err = check_type(KEYS[1], 'zset') or check_type(KEYS[2], 'hash')
if err then return err end
local now = now_ms()
local seen = redis.call('HMGET', KEYS[2], 'at', 'worker', 'left')
local reply = {fmt(now), seen[1] or '', seen[2] or '', seen[3] or ''}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. fmt(now), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  reply[#reply + 1] = live[i]
  reply[#reply + 1] = live[i + 1]
end
return reply
