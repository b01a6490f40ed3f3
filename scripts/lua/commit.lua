-- commit.lua: the second half of a claim in a namespace with replicas: make
-- the decision hold.lua wrote visible, once WAIT said enough replicas have
-- it. Each timer held that is still scheduled at its held due time fires
-- as claim.lua fires it, by the same fire writer (includes/fire.lua: record,
-- fired set, expire set, counters, a wakeup on its channel, the stream
-- entry), with the fire time and fire stream entry ID
-- the hold chose, so that committing the same hold again on a promoted
-- replica gives the same fire. A timer cancelled or rescheduled since the
-- hold is skipped.
--
-- KEYS: the namespace's seven keys, then its traces hash, KEYS[9] its
--       quarantine hash (unused here), KEYS[10] the shard's hold hash (see
--       hold.lua), KEYS[11] its deliveries hash (id -> endpoint name, as
--       claim.lua takes it: the name moves into the fire stream entry),
--       KEYS[12] its timer meta hash (read only, as claim.lua's KEYS[11] for the timers it fires)
-- ARGV[1] token: the hold's token, as hold.lua was given it
-- ARGV[2] retention_ms: how long fired records are kept; 0 keeps them forever
-- ARGV[3] stream_maxlen: approximate bound of the fire stream; 0 = unbounded
-- ARGV[4] channel prefix: a fired timer's wakeup goes to prefix .. id
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

local counts = counters_batch()
local f = fire_batch(tonumber(meta[2]), tonumber(ARGV[2]), KEYS[11], counts, nil, KEYS[12])
local maxlen = tonumber(ARGV[3])

-- Phase 1: read and check each held timer; it fires if it is still
-- scheduled at the due time held.
local rem = {}
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
      -- written keeps its millisecond, as claim.lua does. e[6] is the
      -- timer's rank in the hold, for its reserved entry ID.
      fire_add(f, id, ms_of(due_s), created, payload)[6] = h[3]
      is_fired[id] = true
      rem[#rem + 1] = id
    end
  end
end
local events = f.events

-- The earliest due time left: the first of the n+1 lowest members that
-- does not fire now.
local reply = {f.now_s, '', 'ok'}
local lowest
if LAYOUT == 1 then
  lowest = redis.call('ZRANGE', KEYS[1], 0, #events, 'WITHSCORES')
else
  lowest = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', PENDING_END, 'WITHSCORES', 'LIMIT', 0, #events + 1)
end
for i = 1, #lowest, 2 do
  if not is_fired[lowest[i]] then
    reply[2] = lowest[i + 1]
    break
  end
end

-- The traceparents and endpoints move into the stream entries, as in
-- claim.lua.
err = fire_read(f)
if err then return err end
fire_reply(f, reply)

-- The reserved entry IDs: meta ms-seq onwards.
local ms, seq = tonumber(meta[3]), tonumber(meta[4])

-- Phase 2: probes. HDEL of the hold first: Redis does not refuse it under
-- OOM, so a full Redis still commits.
err = probe('HDEL', KEYS[10])
if not err and #events > 0 then
  err = probe('HSET', KEYS[10]) or probe('ZREM', KEYS[1]) or fire_probes(f) or
    (maxlen > 0 and probe('XTRIM', KEYS[6])) or counters_probes(counts)
end
if err then return err end

-- Phase 3: publish, then write.
err = fire_publish(f, ARGV[4])
if err then return err end
redis.call('HDEL', KEYS[10], unpack(fields))
if #events > 0 then
  redis.call('ZREM', KEYS[1], unpack(rem))
  -- An ID at or below the stream's last entry is refused, changing
  -- nothing: then Redis picks this one and the rest (see above).
  local reserved, top = true, nil
  fire_write(f, function(_, e, entry)
    if reserved then
      local r = redis.pcall('XADD', KEYS[6], fmt(ms) .. '-' .. fmt(seq + e[6]), unpack(entry))
      if type(r) == 'table' and r.err then
        reserved = false
      else
        top = r
      end
    end
    if not reserved then top = redis.call('XADD', KEYS[6], '*', unpack(entry)) end
  end)
  redis.call('HSET', KEYS[10], 'top', top)
  if maxlen > 0 then
    redis.call('XTRIM', KEYS[6], 'MAXLEN', '~', maxlen)
  end
  counters_write(counts)
end
return reply
