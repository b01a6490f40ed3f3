-- recur_put.lua: create, update, pause, resume or delete one schedule, with
-- its pending occurrences, in one atomic step.
--
-- KEYS: one shard's keys (includes/check_types.lua), then KEYS[8] the debounce window
--       of a debounce key named like the schedule (keyspace Space.Debounce,
--       read only), then its timer meta hash, owner index and owners'
--       epochs, deliveries, endpoint names, schedules and sched-due
--       (includes/recur_keys.lua, which counts them from the end).
-- ARGV[1] op: 'create' | 'update' | 'pause' | 'resume' | 'delete'
-- ARGV[2] schedule id
-- ARGV[3] expected version, or '' for any; for create, the count to start
--         from ('' = 0), which a restore of an exported schedule sets; a
--         create counts each occurrence it arms, and also each that exists
--         already, scheduled or fired (restored by a timer import)
-- ARGV[4] body: the record's JSON, or '' to keep it
-- ARGV[5] state after: 'a', 'p' or 'e' (ignored by delete)
-- ARGV[6] last_ms after, or '-' to keep it
-- ARGV[7] occurrence payload
-- ARGV[8] wake channel
-- ARGV[9] prefix of the timers' own channels
-- ARGV[10] retention_ms of cancelled occurrences; 0 = forever
-- ARGV[11] overlap policy after: 'allow' or 'skip', or '' to keep it
-- ARGV[12] the endpoint the occurrences deliver to, '' for none, then
--          after a space the schedule's own URL if it has one, and
--          "\0<flow key>" after that for a schedule with a flow key; a
--          create or update naming an endpoint that ENDPOINTS_KEY lacks is
--          refused with 'TIMERQ_NOENDPOINT <name>' before any write
-- ARGV[13] the shard's schedules quota (queue.Quotas.Schedules, per shard;
--          '0' for none): a create of a new schedule when SCHED_KEY holds
--          that many is refused, 'TIMERQ_QUOTA schedules <quota> <held> 1',
--          before any write; the other ops never add one
-- ARGV[14] the occurrences' owner and labels, as includes/meta.lua takes
--          them ('' for none): each occurrence it creates, rewrites or
--          revives gets them, with its owner's current epoch, in place of
--          the meta it had (its old owner's index entry goes, and with ''
--          its meta field)
-- ARGV[15..] pairs nominal_ms, due_ms: occurrences to arm
-- Reply: {status, now_ms, record}: status 'created', 'exists' (create of an
--        existing ID: record unchanged), 'debounce' (create of an ID that
--        is a debounce key with an open window: nothing written), 'ok', 'notfound' or 'conflict'
--        (the version differs; record returned as it is).
-- Complexity: O((a + k) log N) for a armed and k new occurrences.
--
-- Every op but create first cancels the schedule's pending occurrences,
-- except those it arms again in the same call, which are rewritten in place
-- (new payload and due time) without a 'cancelled' wakeup. An occurrence
-- that a pause or update cancelled is revived if a later resume or update
-- arms the same nominal time; a fired occurrence is never armed again.
-- It runs in the three phases of includes/probe.lua (reads and checks, probes of every
-- write, then the PUBLISHes and the writes), so a refused command (ACL,
-- OOM) leaves everything as it was.

recur_keys()
local err = check_recur_types()
if err then return err end

local op, sid, expected = ARGV[1], ARGV[2], ARGV[3]
local now = now_ms()
local now_s = fmt(now)
local rec = redis.call('HGET', SCHED_KEY, sid)

local v, st, cnt, last, armed, overlap, body = 0, 'a', 0, '', '', 'allow', ''
if op == 'create' then
  if rec then return {'exists', now_s, rec} end
  -- Both own the timer IDs "<id>@<ms>" (debounce.lua refuses the other way).
  err = check_type(KEYS[8], 'string')
  if err then return err end
  if redis.call('GET', KEYS[8]) then return {'debounce', now_s, ''} end
  local quota = tonumber(ARGV[13])
  if quota > 0 then
    err = over_quota('schedules', quota, redis.call('HLEN', SCHED_KEY), 1)
    if err then return err end
  end
  cnt = tonumber(expected) or 0
else
  if not rec then return {'notfound', now_s, ''} end
  v, st, cnt, last, armed, overlap, body = sdecode(rec)
  if expected ~= '' and fmt(v) ~= expected then return {'conflict', now_s, rec} end
end
if ARGV[4] ~= '' then body = ARGV[4] end
if ARGV[11] ~= '' then overlap = ARGV[11] end
if ARGV[6] ~= '-' then last = ARGV[6] end
local new_state = ARGV[5]
local payload = ARGV[7]
local retention = tonumber(ARGV[10])
local endpoint = ARGV[12]
local delivers, derr = check_hash(DELIVER_KEY)
if derr then return derr end
-- The endpoint's name, before the schedule's own URL (after a space) or
-- its flow key (after a \0) if it has one; the whole value goes into the
-- deliveries hash.
local endpoint_name = string.match(endpoint, '^[^ %z]*')
if endpoint_name ~= '' and (op == 'create' or op == 'update') then
  err = check_type(ENDPOINTS_KEY, 'hash')
  if err then return err end
  if redis.call('HEXISTS', ENDPOINTS_KEY, endpoint_name) == 0 then
    return redis.error_reply('TIMERQ_NOENDPOINT ' .. endpoint_name)
  end
end

-- Pending occurrences, by nominal ms: cancelled unless armed again below.
local pending = {}
for _, n in ipairs(split(armed)) do
  local oid = occ_id(sid, n)
  local due = redis.call('ZSCORE', KEYS[1], oid)
  -- (in layout 2 a settled occurrence sorts in a band of KEYS[1])
  if due and tonumber(due) < BAND_FIRED then pending[n] = {oid = oid, due = fmt_due(tonumber(due)), rec = redis.call('HGET', KEYS[2], oid)} end
end

wake_start()
local writes, keep, min_due = {}, {}, nil
if op ~= 'pause' and op ~= 'delete' then
  for i = 15, #ARGV, 2 do
    local n, due = ARGV[i], ARGV[i + 1]
    local oid = occ_id(sid, n)
    local p = pending[n]
    local orec = p and p.rec or redis.call('HGET', KEYS[2], oid)
    local created = now_s
    local kind = nil
    if p then
      kind = 'rewrite'
      pending[n] = nil
      local _, _, c = decode(orec)
      created = c
    elseif not orec then
      kind = 'create'
      cnt = cnt + 1
    else
      local ost, _, c = decode(orec)
      if ost == 'c' then
        kind = 'revive'
        created = c
        cnt = cnt + 1
      elseif ost == 's' then
        kind = 'keep'
        -- A create that finds its occurrence scheduled is a restore after
        -- the timers' import: the occurrence is one of the schedule's.
        if op == 'create' then cnt = cnt + 1 end
      elseif op == 'create' then
        -- Fired: that occurrence happened and is never armed again; in a
        -- restore it is one of the exported count (it fired between the
        -- timers' import and this), so it counts.
        cnt = cnt + 1
      end
    end
    if kind then
      keep[#keep + 1] = n
      local d = tonumber(due)
      if kind == 'keep' then d = tonumber(redis.call('ZSCORE', KEYS[1], oid)) end
      if min_due == nil or d < min_due then min_due = d end
      if kind ~= 'keep' then
        writes[#writes + 1] = {kind = kind, oid = oid, due = due, created = created}
        wake_consider(d)
      end
    end
  end
end

-- What is left in pending is cancelled.
local cancels = {}
for _, p in pairs(pending) do
  cancels[#cancels + 1] = p
  cnt = cnt - 1
end

-- The occurrences it creates, rewrites or revives take the schedule's
-- meta, and shed what their old meta leaves: the field when the schedule
-- has none now, the old owner's index entry when the owner changed
-- (includes/meta.lua, meta_replace).
local metas = meta_batch(META_KEY, OWNERS_KEY, EPOCHS_KEY)
local had_meta, merr = check_hash(META_KEY)
if merr then return merr end
for _, w in ipairs(writes) do
  local m = nil
  if ARGV[14] ~= '' then
    m, merr = meta_add(metas, w.oid, w.due, ARGV[14])
    if merr then return merr end
  end
  if had_meta then meta_replace(metas, w.oid, redis.call('HGET', META_KEY, w.oid), m) end
end
err = meta_check(metas)
if err then return err end

-- Phase 2: probes of every write below, a ZADD first.
local probes = {}
if #cancels > 0 then cancel_probes(probes, retention) end
local revives = false
for _, w in ipairs(writes) do
  if w.kind == 'revive' then revives = true end
end
if #writes > 0 then
  probes[#probes + 1] = {'ZADD', KEYS[1]}
  probes[#probes + 1] = {'HSET', KEYS[2]}
  -- An armed occurrence delivers to the schedule's endpoint, or to none.
  if endpoint ~= '' then
    probes[#probes + 1] = {'HSET', DELIVER_KEY}
  elseif delivers then
    probes[#probes + 1] = {'HDEL', DELIVER_KEY}
  end
end
if revives then
  probes[#probes + 1] = {'ZREM', KEYS[4]}
  probes[#probes + 1] = {'ZREM', KEYS[5]}
end
if op == 'delete' then
  probes[#probes + 1] = {'HDEL', SCHED_KEY}
  probes[#probes + 1] = {'ZREM', SDUE_KEY}
else
  probes[#probes + 1] = {'HSET', SCHED_KEY}
  probes[#probes + 1] = {new_state == 'a' and 'ZADD' or 'ZREM', SDUE_KEY}
end
err = probe_all(probes) or meta_probes(metas)
if err then return err end

-- Phase 3: publish, then write.
for _, c in ipairs(cancels) do
  err = cancel_publish(ARGV[9] .. c.oid)
  if err then return err end
end
err = wake_publish(ARGV[8])
if err then return err end

for _, c in ipairs(cancels) do
  local _, _, created, _, opayload = decode(c.rec)
  cancel_timer(c.oid, c.due, created, opayload, now, retention)
end
for _, w in ipairs(writes) do
  if w.kind == 'revive' then
    redis.call('ZREM', KEYS[4], w.oid)
    redis.call('ZREM', KEYS[5], w.oid)
  end
  redis.call('HSET', KEYS[2], w.oid, encode('s', '', w.created, '', payload))
  redis.call('ZADD', KEYS[1], w.due, w.oid)
  if endpoint ~= '' then
    redis.call('HSET', DELIVER_KEY, w.oid, endpoint)
  elseif delivers then
    redis.call('HDEL', DELIVER_KEY, w.oid)
  end
end

meta_write(metas)

if op == 'delete' then
  redis.call('HDEL', SCHED_KEY, sid)
  redis.call('ZREM', SDUE_KEY, sid)
  return {'ok', now_s, ''}
end

if op == 'create' then v = 1 else v = v + 1 end
rec = sencode(v, new_state, cnt, last, table.concat(keep, ','), overlap, body)
redis.call('HSET', SCHED_KEY, sid, rec)
if new_state == 'a' then
  redis.call('ZADD', SDUE_KEY, fmt(min_due or now), sid)
else
  redis.call('ZREM', SDUE_KEY, sid)
end
if op == 'create' then return {'created', now_s, rec} end
return {'ok', now_s, rec}
