-- flow_pop.lua: hand a consumer the parked fires whose flows may be tried
-- again (queue.Lease under flow policies), round-robin across those
-- flows: each ready flow gives at most ceil(count / ready flows) of its
-- oldest fires, and a flow served goes behind the flows that waited
-- longer. Each fire goes back into the group's pending entry list,
-- leased to the consumer, with the attempt it was parked with, in the
-- same script that takes it out of the parked set.
--
-- KEYS[1] fires   STREAM the shard's fire stream
-- KEYS[2] ready   ZSET   flow -> Redis time (ms) it may next be tried
-- KEYS[3] parked  ZSET   the parked fires (flow_park.lua)
-- KEYS[4] hint    HASH   flow -> most fires to take (flow_park.lua)
-- ARGV[1] group
-- ARGV[2] consumer
-- ARGV[3] count: most fires to hand over (1..1000)
-- Reply: {now_ms, next, {}, e_1, ..., e_k}, each e = {stream_id, attempt,
--        field_1, value_1, ...} as lease.lua's; next is the Redis time
--        (ms) the earliest flow still parked may be tried, '' if none.
--        The empty list stands where lease.lua lists what it dead-lettered
--        (this script dead-letters nothing), so that one reader reads both.
--        A parked fire whose entry left the stream (Options.StreamMaxLen)
--        is dropped.
-- Complexity: O(F log R + k (log Q + log P)) for F ready flows visited
--        (at most count), R flows parked, Q parked fires, P pending.

local err = check_type(KEYS[1], 'stream') or check_type(KEYS[2], 'zset') or check_type(KEYS[3], 'zset') or check_type(KEYS[4], 'hash')
if err then return err end
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()

local function next_ready()
  local head = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #head == 0 then return '' end
  return head[2]
end

local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, count)
if #due == 0 then return {fmt(now), next_ready(), {}} end
local nflows = #due / 2
local share = math.ceil(count / nflows)
local names = {}
for i = 1, #due, 2 do names[#names + 1] = due[i] end
local hint = redis.call('HMGET', KEYS[4], unpack(names))
local takes, rem, serve, gone = {}, {}, {}, {}
for f, flow in ipairs(names) do
  local lo, hi = '[' .. flow .. '\0', '(' .. flow .. '\1'
  local total = tonumber(redis.call('ZLEXCOUNT', KEYS[3], lo, hi))
  local take = share
  if hint[f] then take = math.max(1, math.min(share, tonumber(hint[f]) or share)) end
  local ms = redis.call('ZRANGEBYLEX', KEYS[3], lo, hi, 'LIMIT', 0, take)
  for _, m in ipairs(ms) do
    local padded, attempt = string.match(m, '%z(%d+%-%d+)%z(%d+)$')
    local pms, pseq = string.match(padded or '', '^(%d+)-(%d+)$')
    rem[#rem + 1] = m
    if pms then
      local id = fmt(tonumber(pms)) .. '-' .. fmt(tonumber(pseq))
      if #redis.call('XRANGE', KEYS[1], id, id) == 1 then
        takes[#takes + 1] = {id, attempt}
      end
    end
  end
  if total > #ms then serve[#serve + 1] = flow else gone[#gone + 1] = flow end
end

-- Phase 2: probes. XCLAIM of no group fails with NOGROUP once Redis
-- checked the rights; ZRANGEBYSCORE runs again after the writes.
local r = redis.pcall('XCLAIM', KEYS[1], '', consumer, 0, '0-0')
if type(r) == 'table' and r.err and not string.find(r.err, 'NOGROUP', 1, true) then
  return refusal(r.err, 'XCLAIM', KEYS[1])
end
err = probe_all({{'ZREM', KEYS[3]}, {'ZADD', KEYS[2]}, {'ZREM', KEYS[2]}, {'HDEL', KEYS[4]}})
if err then return err end

-- Phase 3: writes.
local reply = {fmt(now), '', {}}
for _, t in ipairs(takes) do
  local c = redis.pcall('XCLAIM', KEYS[1], group, consumer, 0, t[1], 'RETRYCOUNT', t[2], 'FORCE')
  if type(c) == 'table' and c.err then
    -- The group is gone (XGROUP DESTROY): nothing was claimed yet, since
    -- every claim names the same group; leave the fires parked.
    if string.find(c.err, 'NOGROUP', 1, true) then return {fmt(now), next_ready(), {}} end
    return redis.error_reply(c.err)
  end
  if c[1] and type(c[1]) == 'table' then
    local e = {c[1][1], t[2]}
    for _, v in ipairs(c[1][2]) do e[#e + 1] = v end
    reply[#reply + 1] = e
  end
end
redis.call('ZREM', KEYS[3], unpack(rem))
if #serve > 0 then
  local add = {}
  for _, f in ipairs(serve) do
    add[#add + 1] = fmt(now)
    add[#add + 1] = f
  end
  redis.call('ZADD', KEYS[2], unpack(add))
end
if #gone > 0 then
  redis.call('ZREM', KEYS[2], unpack(gone))
  redis.call('HDEL', KEYS[4], unpack(gone))
end
reply[2] = next_ready()
return reply
