-- purge.lua: remove settled (fired or cancelled) timers whose retention ended.
--
-- KEYS: the namespace's seven keys, then its traces hash (see includes/check_types.lua),
--       then KEYS[9] its deliveries hash (id -> endpoint name, schedule.lua),
--       KEYS[10] its timer meta hash and KEYS[11] its owners index
--       (keyspace TimerMeta, Owners): a purged timer's meta goes with its
--       record, and its owner's index entry with it.
-- ARGV[1] limit: most records to remove in this call
-- ARGV[2] retention_ms: in layout 2, how long after it settled a timer is
--         removed (0: never); layout 1 keeps each timer's purge time in
--         the expire set, written when it settled
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
-- So do the meta hash and the owners index, once a timer had meta.
local metas, merr = check_hash(KEYS[10])
if merr then return merr end
if metas then
  merr = check_type(KEYS[11], 'zset')
  if merr then return merr end
end

local now = now_ms()
local limit = tonumber(ARGV[1])
local ids, expired
if LAYOUT == 1 then
  ids = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, limit)
  -- Counted before the writes, so that nothing runs after them.
  expired = redis.call('ZCOUNT', KEYS[5], '-inf', now)
else
  -- The timers of each band settled at or before now - retention.
  local retention = tonumber(ARGV[2]) or 0
  if retention <= 0 then return {0, 0} end
  ids, expired = {}, 0
  for _, band in ipairs({BAND_FIRED, BAND_CANCELLED}) do
    local from, to = fmt(band), fmt(band + now - retention)
    if #ids < limit then
      for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], from, to, 'LIMIT', 0, limit - #ids)) do
        ids[#ids + 1] = id
      end
    end
    expired = expired + redis.call('ZCOUNT', KEYS[1], from, to)
  end
end
local n = #ids
if n > 0 then
  -- Probes, ZREMRANGEBYRANK first: none of purge's writes can be refused
  -- under OOM, which is when purging matters most; only ACLs can refuse.
  local probes = {{'ZREMRANGEBYRANK', KEYS[5]}, {'HDEL', KEYS[2]}, {'ZREM', KEYS[3]}, {'ZREM', KEYS[4]}}
  if LAYOUT == 2 then probes = {{'ZREM', KEYS[1]}, {'HDEL', KEYS[2]}} end
  if traces then probes[#probes + 1] = {'HDEL', KEYS[8]} end
  if delivers then probes[#probes + 1] = {'HDEL', KEYS[9]} end
  -- The owners' entries of the purged timers: "<owner>\0<id>" from the
  -- meta of those that have an owner.
  local owned = nil
  if metas then
    probes[#probes + 1] = {'HDEL', KEYS[10]}
    local values = redis.call('HMGET', KEYS[10], unpack(ids))
    for i = 1, n do
      local owner = values[i] and string.match(values[i], '^%d*\31[^\31]*\31([^\31]+)')
      if owner then
        owned = owned or {}
        owned[#owned + 1] = owner .. '\0' .. ids[i]
      end
    end
    if owned then probes[#probes + 1] = {'ZREM', KEYS[11]} end
  end
  err = probe_all(probes)
  if err then return err end
  -- A cancelled traced timer's traceparent goes with its record (a fired
  -- one's went at the claim).
  if traces then redis.call('HDEL', KEYS[8], unpack(ids)) end
  -- So does a cancelled delivering timer's endpoint name.
  if delivers then redis.call('HDEL', KEYS[9], unpack(ids)) end
  if metas then redis.call('HDEL', KEYS[10], unpack(ids)) end
  if owned then redis.call('ZREM', KEYS[11], unpack(owned)) end
  redis.call('HDEL', KEYS[2], unpack(ids))
  if LAYOUT == 2 then
    redis.call('ZREM', KEYS[1], unpack(ids))
  else
    redis.call('ZREM', KEYS[3], unpack(ids))
    redis.call('ZREM', KEYS[4], unpack(ids))
    redis.call('ZREMRANGEBYRANK', KEYS[5], 0, n - 1)
  end
end
return {n, expired - n}
