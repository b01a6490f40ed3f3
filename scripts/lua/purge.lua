-- purge.lua: remove settled (fired or cancelled) timers whose retention ended.
--
-- KEYS: the namespace's seven keys, then its traces hash (see includes/check_types.lua),
--       then KEYS[9] its deliveries hash (id -> endpoint name, schedule.lua).
-- ARGV[1] limit: most records to remove in this call
-- Reply: {removed, remaining_expired}: remaining_expired > 0 means call again.
-- Complexity: O(k log N) for k removed records.
--
-- Idempotent: two maintenance holders overlapping remove each record once.

local err = check_types()
if err then return err end

local traces, terr = check_traces()
if terr then return terr end

-- The deliveries hash exists only once a delivering timer was scheduled.
local delivers, derr = check_hash(KEYS[9])
if derr then return derr end

local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local n = #ids
-- Counted before the writes, so that nothing runs after them.
local expired = redis.call('ZCOUNT', KEYS[5], '-inf', now)
if n > 0 then
  -- Probes, ZREMRANGEBYRANK first: none of purge's writes can be refused
  -- under OOM, which is when purging matters most; only ACLs can refuse.
  local probes = {{'ZREMRANGEBYRANK', KEYS[5]}, {'HDEL', KEYS[2]}, {'ZREM', KEYS[3]}, {'ZREM', KEYS[4]}}
  if traces then probes[#probes + 1] = {'HDEL', KEYS[8]} end
  if delivers then probes[#probes + 1] = {'HDEL', KEYS[9]} end
  err = probe_all(probes)
  if err then return err end
  -- A cancelled traced timer's traceparent goes with its record (a fired
  -- one's went at the claim).
  if traces then redis.call('HDEL', KEYS[8], unpack(ids)) end
  -- So does a cancelled delivering timer's endpoint name.
  if delivers then redis.call('HDEL', KEYS[9], unpack(ids)) end
  redis.call('HDEL', KEYS[2], unpack(ids))
  redis.call('ZREM', KEYS[3], unpack(ids))
  redis.call('ZREM', KEYS[4], unpack(ids))
  redis.call('ZREMRANGEBYRANK', KEYS[5], 0, n - 1)
end
return {n, expired - n}
