-- claim.lua: fire up to ARGV[1] due timers, atomically and exactly once.
--
-- KEYS: the namespace's six keys (see prelude.lua).
-- ARGV[1] limit: most timers to claim (1..1000)
-- ARGV[2] retention_ms: how long fired records are kept; 0 keeps them forever
-- ARGV[3] stream_maxlen: approximate bound of the fire stream; 0 = unbounded
-- ARGV[4] channel prefix: a fired timer's wakeup goes to prefix .. id
-- ARGV[5] notify channel: told how many timers a claim fired, once per claim
--         that fired any, so consumers of the fire stream wake (optional)
-- Reply: {now_ms, earliest_ms_or_empty, id_1, due_1, payload_1, id_2, ...};
--        every timer of one claim has fired_at = now_ms.
-- Complexity: O(log N + k) for k claimed timers in a set of N, plus one
--        PUBLISH and one XADD per claimed timer, and one XTRIM per claim.
--
-- A timer is due when due_ms <= now_ms of the server clock, never earlier.
-- Removing it from the due set and marking it fired happen in this one
-- script, so no two claimers can both see it.

local err = check_types()
if err then return err end

local now = now_ms()
local now_s = fmt(now)
local limit = tonumber(ARGV[1])
local retention = tonumber(ARGV[2])
local maxlen = tonumber(ARGV[3])
local prefix = ARGV[4]
local notify = ARGV[5]

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
local n = #due / 2
local reply = {now_s, ''}
if n > 0 then
  if notify and notify ~= '' then
    redis.call('PUBLISH', notify, n)
  end
  -- The due members are exactly the lowest ranks, so removing by rank is
  -- O(log N + n) instead of n separate ZREMs.
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
  local ids = {}
  for i = 1, n do ids[i] = due[2 * i - 1] end
  local recs = redis.call('HMGET', KEYS[2], unpack(ids))
  local hset, fired, expire = {}, {}, {}
  local purge_at = fmt(now + retention)
  for i = 1, n do
    local id, rec = ids[i], recs[i]
    if rec then
      local due_ms = fmt(tonumber(due[2 * i]))
      local _, _, created, _, payload = decode(rec)
      hset[#hset + 1] = id
      hset[#hset + 1] = encode('f', due_ms, created, now_s, payload)
      fired[#fired + 1] = due_ms
      fired[#fired + 1] = id
      expire[#expire + 1] = purge_at
      expire[#expire + 1] = id
      redis.call('XADD', KEYS[6], '*',
        'id', id, 'due', due_ms, 'fired', now_s, 'payload', payload)
      redis.call('PUBLISH', prefix .. id, 'fired')
      reply[#reply + 1] = id
      reply[#reply + 1] = due_ms
      reply[#reply + 1] = payload
    end
  end
  if #hset > 0 then
    -- One approximate trim per claim rather than per entry (1.6 us a timer
    -- in BENCHMARKS.md); the script is atomic, so no reader sees the
    -- stream past its bound.
    if maxlen > 0 then
      redis.call('XTRIM', KEYS[6], 'MAXLEN', '~', maxlen)
    end
    redis.call('HSET', KEYS[2], unpack(hset))
    redis.call('ZADD', KEYS[3], unpack(fired))
    if retention > 0 then
      redis.call('ZADD', KEYS[5], unpack(expire))
    end
  end
end

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if head[2] then reply[2] = head[2] end
return reply
