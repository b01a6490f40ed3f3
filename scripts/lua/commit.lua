-- commit.lua: the second half of a claim in a namespace with replicas: make
-- the decision hold.lua wrote visible, once WAIT said enough replicas have
-- it. Each timer held that is still scheduled at its held due time fires
-- as claim.lua fires it (record, fired set, expire set, counters, a wakeup
-- on its channel, one notify), with the fire time and fire stream entry ID
-- the hold chose, so that committing the same hold again on a promoted
-- replica gives the same fire. A timer cancelled or rescheduled since the
-- hold is skipped.
--
-- KEYS: the namespace's seven keys, then its traces hash, KEYS[9] its
--       quarantine hash (unused here), KEYS[10] the shard's hold hash (see
--       hold.lua), KEYS[11] its deliveries hash (id -> endpoint name, as
--       claim.lua takes it: the name moves into the fire stream entry)
-- ARGV[1] token: the hold's token, as hold.lua was given it
-- ARGV[2] retention_ms: how long fired records are kept; 0 keeps them forever
-- ARGV[3] stream_maxlen: approximate bound of the fire stream; 0 = unbounded
-- ARGV[4] channel prefix: a fired timer's wakeup goes to prefix .. id
-- ARGV[5] notify channel: told how many timers the commit fired (optional)
-- Reply: {fired_ms, earliest_ms_or_empty, status, id_1, due_1, payload_1,
--        traceparent_1, ...}: status 'ok', or 'lost' when the hold is not
--        this token's any more (another claimer took it over, or it was
--        committed) and nothing was done; earliest is the earliest due time
--        left after the commit.
-- Complexity: O(k log N) for k held timers, plus one PUBLISH and one XADD
--        per fired timer and one XTRIM per commit.
--
-- The entry IDs: the hold reserved ms-seq.. above the last entry a commit
-- added. Should something else have added a later entry since (a requeue,
-- or a claim of a worker that does not know of the replicas setting), the
-- XADD with the reserved ID is refused, changing nothing, and Redis picks
-- the IDs instead (XADD *); such a commit, repeated on a promoted replica,
-- is not identical.

local LATE_MS = {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000}
local LATE_FIELDS = {}
for i, le in ipairs(LATE_MS) do LATE_FIELDS[i] = 'late_le_' .. le end

local err = check_types()
if err then return err end
err = check_type(KEYS[10], 'hash')
if err then return err end

local meta = redis.call('HMGET', KEYS[10], 'token', 'fired', 'ms', 'seq', 'n')
if meta[1] ~= ARGV[1] then return {'', '', 'lost'} end
local fields = {'token', 'lease', 'fired', 'ms', 'seq', 'n'}
local held = {} -- {id, due_s, i}
local nheld = tonumber(meta[5])
if nheld > 0 then
  for i = 1, nheld do fields[#fields + 1] = 'i:' .. fmt(i - 1) end
  local rows = redis.call('HMGET', KEYS[10], unpack(fields, 7))
  for i, row in ipairs(rows) do
    local d, id = string.match(row, '^([%d.]+):(.*)$')
    held[i] = {id, d, i - 1}
  end
end

local fired_s = meta[2]
local fired_at = tonumber(fired_s)
local retention = tonumber(ARGV[2])
local maxlen = tonumber(ARGV[3])
local prefix = ARGV[4]
local notify = ARGV[5]

-- Phase 1: read and check each held timer; it fires if it is still
-- scheduled at the due time held.
local events, hset, fired, expire, rem = {}, {}, {}, {}, {}
local buckets, late_sum = {}, 0
local purge_at = fmt(fired_at + retention)
local ids = {}
for i, h in ipairs(held) do ids[i] = h[1] end
local recs = {}
if #ids > 0 then recs = redis.call('HMGET', KEYS[2], unpack(ids)) end
local is_fired = {}
for i, h in ipairs(held) do
  local id, due_s, rec = h[1], h[2], recs[i]
  if rec then
    local state, _, created, _, payload = decode(rec)
    if state == 's' and due_of(id) == due_s then
      -- The held due score is exact (it must match the score); what is
      -- written keeps its millisecond, as claim.lua does.
      due_s = ms_of(due_s)
      events[#events + 1] = {id, due_s, payload, nil, h[3]}
      is_fired[id] = true
      rem[#rem + 1] = id
      hset[#hset + 1] = id
      hset[#hset + 1] = encode('f', due_s, created, fired_s, payload)
      fired[#fired + 1] = due_s
      fired[#fired + 1] = id
      expire[#expire + 1] = purge_at
      expire[#expire + 1] = id
      local late = math.max(fired_at - tonumber(due_s), 0)
      late_sum = late_sum + late
      local b = 'late_le_inf'
      for j = 1, #LATE_MS do
        if late <= LATE_MS[j] then b = LATE_FIELDS[j]; break end
      end
      buckets[b] = (buckets[b] or 0) + 1
    end
  end
end

-- The earliest due time left: the first of the n+1 lowest members that
-- does not fire now.
local reply = {fired_s, '', 'ok'}
local lowest = redis.call('ZRANGE', KEYS[1], 0, #events, 'WITHSCORES')
for i = 1, #lowest, 2 do
  if not is_fired[lowest[i]] then
    reply[2] = lowest[i + 1]
    break
  end
end

-- The traceparents (e[4]) and endpoints (e[6]) move into the stream
-- entries, as in claim.lua.
local traced, delivering
traced, err = take_values(KEYS[8], events, 4)
if err then return err end
delivering, err = take_values(KEYS[11], events, 6)
if err then return err end
for _, e in ipairs(events) do
  reply[#reply + 1] = e[1]
  reply[#reply + 1] = e[2]
  reply[#reply + 1] = e[3]
  reply[#reply + 1] = e[4] or ''
end

-- The reserved entry IDs: meta ms-seq onwards.
local ms, seq = tonumber(meta[3]), tonumber(meta[4])

-- Phase 2: probes. HDEL of the hold first: Redis does not refuse it under
-- OOM, so a full Redis still commits.
local probes = {{'HDEL', KEYS[10]}}
if #events > 0 then probes[#probes + 1] = {'HSET', KEYS[10]} end
if #events > 0 then
  probes[#probes + 1] = {'ZREM', KEYS[1]}
  probes[#probes + 1] = {'HSET', KEYS[2]}
  probes[#probes + 1] = {'ZADD', KEYS[3]}
  if retention > 0 then probes[#probes + 1] = {'ZADD', KEYS[5]} end
  probes[#probes + 1] = {'XADD', KEYS[6]}
  if maxlen > 0 then probes[#probes + 1] = {'XTRIM', KEYS[6]} end
  probes[#probes + 1] = {'HINCRBY', KEYS[7]}
  if #traced > 0 then probes[#probes + 1] = {'HDEL', KEYS[8]} end
  if #delivering > 0 then probes[#probes + 1] = {'HDEL', KEYS[11]} end
end
err = probe_all(probes)
if err then return err end

-- Phase 3: publish, then write.
if notify and notify ~= '' and #events > 0 then
  err = publish(notify, fmt(#events))
  if err then return err end
end
for _, e in ipairs(events) do
  err = publish(prefix .. e[1], 'fired')
  if err then return err end
end
redis.call('HDEL', KEYS[10], unpack(fields))
if #events > 0 then
  redis.call('ZREM', KEYS[1], unpack(rem))
  -- An ID at or below the stream's last entry is refused, changing
  -- nothing: then Redis picks this one and the rest (see above).
  local reserved, top = true, nil
  for _, e in ipairs(events) do
    local entry = {'id', e[1], 'due', e[2], 'fired', fired_s, 'payload', e[3]}
    if e[4] then
      entry[#entry + 1] = 'traceparent'
      entry[#entry + 1] = e[4]
    end
    if e[6] then
      -- "<endpoint>\0<flow key>" for a timer with a flow key (schedule.lua).
      local name, flow = string.match(e[6], '^([^%z]*)%z(.*)$')
      if not name then name = e[6] end
      if name ~= '' then
        entry[#entry + 1] = 'endpoint'
        entry[#entry + 1] = name
      end
      if flow then
        entry[#entry + 1] = 'flow'
        entry[#entry + 1] = flow
      end
    end
    if reserved then
      local r = redis.pcall('XADD', KEYS[6], fmt(ms) .. '-' .. fmt(seq + e[5]), unpack(entry))
      if type(r) == 'table' and r.err then
        reserved = false
      else
        top = r
      end
    end
    if not reserved then top = redis.call('XADD', KEYS[6], '*', unpack(entry)) end
  end
  redis.call('HSET', KEYS[10], 'top', top)
  if maxlen > 0 then
    redis.call('XTRIM', KEYS[6], 'MAXLEN', '~', maxlen)
  end
  redis.call('HSET', KEYS[2], unpack(hset))
  if #traced > 0 then redis.call('HDEL', KEYS[8], unpack(traced)) end
  if #delivering > 0 then redis.call('HDEL', KEYS[11], unpack(delivering)) end
  redis.call('ZADD', KEYS[3], unpack(fired))
  if retention > 0 then
    redis.call('ZADD', KEYS[5], unpack(expire))
  end
  redis.call('HINCRBY', KEYS[7], 'fired', #events)
  redis.call('HINCRBY', KEYS[7], 'late_sum_ms', fmt(late_sum))
  for b, c in pairs(buckets) do
    redis.call('HINCRBY', KEYS[7], b, c)
  end
end
return reply
