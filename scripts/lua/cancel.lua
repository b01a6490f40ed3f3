-- cancel.lua: cancel a scheduled timer and wake its waiters.
--
-- KEYS: the namespace's six keys (see prelude.lua).
-- ARGV[1] id
-- ARGV[2] retention_ms: how long the cancelled record is kept; 0 = forever
-- ARGV[3] the timer's wakeup channel
-- Reply: {status, record}: status 'ok' (cancelled now), 'cancelled' (it already
--        was: a no-op), 'fired' (too late) or 'notfound' (no record).
-- Complexity: O(log N).

local err = check_types()
if err then return err end

local id = ARGV[1]
local rec = redis.call('HGET', KEYS[2], id)
if not rec then return {'notfound', ''} end
local state, _, created, _, payload = decode(rec)
if state == 'f' then return {'fired', rec} end
if state == 'c' then return {'cancelled', rec} end

local now = now_ms()
local due = due_of(id)
rec = encode('c', due, created, fmt(now), payload)
redis.call('HSET', KEYS[2], id, rec)
redis.call('ZREM', KEYS[1], id)
redis.call('ZADD', KEYS[4], due, id)
local retention = tonumber(ARGV[2])
if retention > 0 then
  redis.call('ZADD', KEYS[5], fmt(now + retention), id)
end
redis.call('PUBLISH', ARGV[3], 'cancelled')
return {'ok', rec}
