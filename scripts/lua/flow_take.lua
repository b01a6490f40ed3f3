-- flow_take.lua: grant deliveries of flows their rate and in-flight slots
-- (queue.Lease under flow policies). Each flow's state is one sorted set
-- in the flow's home shard (keyspace FlowState, FlowHome): its deliveries
-- under way, member "<shard>-<stream entry ID>", score the Redis time (ms)
-- the delivery's lease ends; and the member '' whose score is the flow's
-- GCRA theoretical arrival time (ms). Every delivery of a flow, whatever
-- shard its fire is in and whichever consumer asks, is counted here, by
-- the server's clock, so the limits hold across the namespace.
--
-- KEYS[i]  ZSET the state of flow i, all in one shard (one slot)
-- ARGV[1]  lease_ms: how long a granted delivery holds its slot unless
--          acknowledged, released or extended first
-- ARGV[2..] per flow i, in KEYS order: rate, period_ms, max_in_flight
--          (0: no bound), n, then n delivery refs (members), oldest first
-- Reply: {now_ms, g_1, next_1, g_2, next_2, ...}: flow i's first g_i refs
--        are granted (each now holds a slot until now_ms + lease_ms); the
--        others are not, and next_i is the Redis time (ms) at which the
--        flow may be tried again ('0' when all were granted).
-- Complexity: O(log H) per flow plus O(log H) per granted ref, for H
--        deliveries of a flow under way.
--
-- The rate is paced (GCRA): one delivery every T = period/rate ms, those
-- whose slots fall within the current millisecond at once. A flow whose
-- slots went unused may catch up by tau = min(period - T, max(T, 250 ms)),
-- so that the long-run rate stays exact when consumers ask late: no
-- window of one period holds more than rate + tau/T + 1 deliveries, and
-- an idle flow starts with a burst of at most tau/T + 1. A flow bound by its
-- in-flight slots is tried again after max(period/rate, 50 ms), at most
-- 250 ms: an acknowledgement in another process cannot wake it sooner.
--
-- Phases (includes/probe.lua): reads and checks; probes; writes (only for flows
-- with a grant). Expired slots (ZREMRANGEBYSCORE up to now) are what
-- releases the slots of a consumer that crashed: within its lease.

for i = 1, #KEYS do
  local err = check_type(KEYS[i], 'zset')
  if err then return err end
end

local lease = tonumber(ARGV[1])
local now = now_ms()
local reply = {fmt(now)}
local plans = {}
local a = 2
for i = 1, #KEYS do
  local rate, period, max, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local first = a + 4
  a = first + n
  local T = period / rate
  -- A flow served late (its consumers were slow to ask) may catch up by
  -- tau: without it every late millisecond would be lost to the rate.
  local tau = math.min(period - T, math.max(T, 250))
  local tat = tonumber(redis.call('ZSCORE', KEYS[i], '') or '0')
  local held = 0
  if max > 0 then
    held = tonumber(redis.call('ZCOUNT', KEYS[i], '(' .. fmt(now), '+inf'))
    if tat > now then held = held - 1 end
  end
  local g, nxt = 0, 0
  for _ = 1, n do
    if max > 0 and held >= max then
      nxt = now + math.min(math.max(T, 50), 250)
      break
    end
    -- Time is counted in whole milliseconds: every slot that starts within
    -- the current one is due.
    local t0 = math.max(tat, now - tau)
    if t0 >= now + 1 then
      nxt = math.floor(t0)
      break
    end
    tat = t0 + T
    held = held + 1
    g = g + 1
  end
  reply[#reply + 1] = g
  reply[#reply + 1] = fmt(nxt)
  if g > 0 then plans[#plans + 1] = {KEYS[i], tat, first, g} end
end
if #plans == 0 then return reply end

-- Phase 2: probes.
local err = probe_all({{'ZADD', plans[1][1]}, {'ZREMRANGEBYSCORE', plans[1][1]}})
if err then return err end
local r = redis.pcall('PEXPIRE', plans[1][1], 'x')
if not (type(r) == 'table' and r.err and string.find(r.err, 'not an integer', 1, true)) then
  return refusal(type(r) == 'table' and r.err or 'ERR timerq: the PEXPIRE probe unexpectedly succeeded', 'PEXPIRE', plans[1][1])
end

-- Phase 3: writes.
local until_ms = fmt(now + lease)
for _, p in ipairs(plans) do
  local key, tat, first, g = p[1], p[2], p[3], p[4]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  local add = {string.format('%.3f', tat), ''}
  for j = 0, g - 1 do
    add[#add + 1] = until_ms
    add[#add + 1] = ARGV[first + j]
  end
  redis.call('ZADD', key, unpack(add))
  redis.call('PEXPIRE', key, fmt(math.max(tat - now, lease) + 1000))
end
return reply
