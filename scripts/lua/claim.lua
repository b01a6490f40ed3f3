-- claim.lua: fire up to ARGV[1] due timers, atomically and exactly once.
--
-- KEYS: the namespace's seven keys, then its traces hash (see includes/check_types.lua),
--       then KEYS[9] its quarantine hash: id -> quarantine_value (includes/check_types.lua),
--       then KEYS[10] its deliveries hash: id -> endpoint name (schedule.lua)
-- ARGV[1] limit: most timers to claim (1..1000)
-- ARGV[2] retention_ms: how long fired records are kept; 0 keeps them forever
-- ARGV[3] stream_maxlen: approximate bound of the fire stream; 0 = unbounded
-- ARGV[4] channel prefix: a fired timer's wakeup goes to prefix .. id
-- ARGV[5] notify channel: told how many timers a claim fired, once per claim
--         that fired any, so consumers of the fire stream wake (optional)
-- Reply: {now, earliest_score_or_empty, q, qid_1, qreason_1, ..., qid_q,
--        qreason_q, id_1, due_1, payload_1, traceparent_1, id_2, ...}: now
--        is the server clock as '<now_ms>.<us>' (us 000-999), the q
--        records this claim quarantined, then the fired timers; every timer
--        of one claim has fired_at = now_ms; traceparent is '' for a timer
--        scheduled outside a trace.
-- Complexity: O(log N + k) for k claimed timers in a set of N, plus one
--        PUBLISH and one XADD per claimed timer (the last one trimming the
--        stream), and a few HINCRBYs (the counters) per claim; when some
--        timer was traced, one HMGET and one HDEL of k fields more.
--
-- A traced timer's traceparent (KEYS[8], written by schedule.lua) moves
-- into its fire stream entry, as the field traceparent, so that a consumer
-- continues the trace that scheduled it. Likewise a delivering timer's
-- endpoint name (KEYS[10], with the timer's own URL after a space if it has
-- one) moves into its entry as the field endpoint, so that a dispatcher
-- finds the endpoint to deliver it to; a value "<endpoint>\0<flow key>" (a
-- timer with a flow key) becomes the fields endpoint (unless '') and flow.
--
-- A timer is due when its due score <= the server clock with its
-- microseconds (clock_due), never earlier.
-- Removing it from the due set and marking it fired happen in this one
-- script, so no two claimers can both see it.
--
-- A due member whose record is malformed (decode), or whose due score is
-- no due time (score_ms), cannot fire, and failing the claim for it would
-- stop every timer of the shard behind it. It is quarantined instead, in
-- the same script: its record moves, byte for byte, from the timers hash to
-- the quarantine hash (with the time, its due score and the reason), it
-- leaves the due set with the rest of the batch, and the counters' field
-- quarantined counts it. The timers beside it fire as usual. Only decode
-- decides what is malformed, so a record timerq wrote is never moved.
--
-- The counters (KEYS[7]) record every fire in Redis, so that metrics count
-- the timers of a claim whose reply never reached its worker: fired, the
-- summed lateness (now_ms - due_ms) in late_sum_ms, and per lateness bucket
-- late_le_<ms> the timers with a lateness above the previous bound and at
-- most <ms> (late_le_inf above the last). queue.LatenessBuckets mirrors
-- LATE_MS; change both together.

-- The key types are checked by the commands themselves, not by a TYPE of
-- each key per call: most claims find nothing due and then only read the
-- due set, whose type ZRANGEBYSCORE checks. A claim that fires checks the
-- type of every key it writes before its first write: the timers hash by
-- HMGET, the fired and expire sets by their probes, the stream and the
-- counters by TYPE, as their probes fail on arguments before looking at
-- the key. typed turns a
-- WRONGTYPE from any of them into check_types' reply, which names the key.
-- err is a pcall's error table, and cmd and key say what it ran; without
-- them, err is an error reply already made (by probe_all).
local function typed(err, cmd, key)
  local msg = string.gsub(err.err, '^%-', '')
  if string.sub(msg, 1, 9) == 'WRONGTYPE' then return check_types() or redis.error_reply(msg) end
  if not cmd then return err end
  return refusal(msg, cmd, key, 'read')
end

-- now_ms, with TIME's microseconds kept for the comparison with the due
-- scores (clock_due) and for the reply's clock.
local clock = redis.call('TIME')
local now = clock_ms(clock)
local now_s = fmt(now)
local now_due = clock_due(clock)
local maxlen = tonumber(ARGV[3])

-- xadd appends a fire entry, with the optional fields given, and when trim
-- is set bounds the stream to about maxlen entries.
local function xadd(trim, id, due_s, payload, ...)
  if trim then
    return redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[3], '*', 'id', id, 'due', due_s, 'fired', now_s,
      'payload', payload, ...)
  end
  return redis.call('XADD', KEYS[6], '*', 'id', id, 'due', due_s, 'fired', now_s, 'payload', payload, ...)
end
local retention = tonumber(ARGV[2])
local prefix = ARGV[4]
local notify = ARGV[5]

-- Arguments go to Redis as strings where the script has them: Redis 7.0
-- formats each number argument of a call with snprintf, which costs about
-- as much as a cheap command.
local due = redis.pcall('ZRANGEBYSCORE', KEYS[1], '-inf', now_due, 'WITHSCORES', 'LIMIT', '0', ARGV[1])
if due.err then return typed(due, 'ZRANGEBYSCORE', KEYS[1]) end
local n = #due / 2
local reply = {now_due, '', '0'}
-- The earliest due time left after the claim: the member ranked just
-- after the n claimed ones, read before the writes so that nothing runs
-- after them.
local n_s = fmt(n)
local head = redis.call('ZRANGE', KEYS[1], n_s, n_s, 'WITHSCORES')
if head[2] then reply[2] = head[2] end
if n > 0 then
  local LATE_MS = {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000}
  -- Phase 1: read and check every record.
  local ids = {}
  for i = 1, n do ids[i] = due[2 * i - 1] end
  local recs = redis.pcall('HMGET', KEYS[2], unpack(ids))
  if recs.err then return typed(recs, 'HMGET', KEYS[2]) end
  local err = check_type(KEYS[7], 'hash') or check_type(KEYS[6], 'stream')
  if err then return err end
  local hset, fired, expire, events = {}, {}, {}, {}
  local buckets, late_sum = {}, 0
  local purge_at = fmt(now + retention)
  local quarantined = {} -- {id, score, reason, rec}
  for i = 1, n do
    local id, rec, score = ids[i], recs[i], due[2 * i]
    -- A due member without a record, or with a settled one, is not a
    -- timer to fire: the claim only drops it from the due set.
    if rec then
      local state, _, created, _, payload = decode(rec)
      -- A fired timer's due time is its score's millisecond (ms_of), as
      -- its fire time is TIME's: due_ms <= now_ms follows from the score
      -- being at or below now_due.
      local due_s = score_ms(score)
      if due_s then due_s = ms_of(due_s) end
      if not state then
        quarantined[#quarantined + 1] = {id, score, 'malformed record', rec}
      elseif state == 's' and not due_s then
        quarantined[#quarantined + 1] = {id, score, 'due score is not a due time', rec}
      elseif state == 's' then
        hset[#hset + 1] = id
        hset[#hset + 1] = encode('f', due_s, created, now_s, payload)
        fired[#fired + 1] = due_s
        fired[#fired + 1] = id
        expire[#expire + 1] = purge_at
        expire[#expire + 1] = id
        events[#events + 1] = {id, due_s, payload}
        local late = now - tonumber(due_s)
        late_sum = late_sum + late
        local b = 0 -- late_le_inf
        for j = 1, 16 do
          if late <= LATE_MS[j] then b = j; break end
        end
        buckets[b] = (buckets[b] or 0) + 1
      end
    end
  end
  if #quarantined > 0 then
    err = check_type(KEYS[9], 'hash')
    if err then return err end
  end
  reply[3] = fmt(#quarantined)
  for _, b in ipairs(quarantined) do
    reply[#reply + 1] = b[1]
    reply[#reply + 1] = b[3]
  end

  -- The traceparents of the timers scheduled inside a trace (e[4]), and
  -- the endpoints of the timers that deliver (e[5]).
  local traced, delivering
  traced, err = take_values(KEYS[8], events, 4)
  if err then return err end
  delivering, err = take_values(KEYS[10], events, 5)
  if err then return err end
  for _, e in ipairs(events) do
    reply[#reply + 1] = e[1]
    reply[#reply + 1] = e[2]
    reply[#reply + 1] = e[3]
    reply[#reply + 1] = e[4] or ''
  end

  -- Phase 2: probes. ZREMRANGEBYRANK goes first: Redis does not refuse it
  -- under OOM, and no write after it, so a full Redis still fires timers.
  -- (Called one by one rather than through probe_all: its list is a
  -- table per probe, on every claim.)
  err = probe('ZREMRANGEBYRANK', KEYS[1])
  if not err and #hset > 0 then
    err = probe('HSET', KEYS[2]) or probe('ZADD', KEYS[3]) or
      (retention > 0 and probe('ZADD', KEYS[5])) or probe('XADD', KEYS[6]) or probe('HINCRBY', KEYS[7]) or
      (#traced > 0 and probe('HDEL', KEYS[8])) or (#delivering > 0 and probe('HDEL', KEYS[10])) or nil
  end
  if not err and #quarantined > 0 then
    err = probe('HDEL', KEYS[2]) or probe('HSET', KEYS[9]) or probe('HINCRBY', KEYS[7])
  end
  if err then return typed(err) end

  -- Phase 3: publish, then write.
  if notify and notify ~= '' and #events > 0 then
    err = publish(notify, fmt(#events))
    if err then return err end
  end
  for _, e in ipairs(events) do
    err = publish(prefix .. e[1], 'fired')
    if err then return err end
  end
  -- The due members are exactly the lowest ranks, so removing by rank is
  -- O(log N + n) instead of n separate ZREMs.
  redis.call('ZREMRANGEBYRANK', KEYS[1], '0', fmt(n - 1))
  if #hset > 0 then
    -- The last entry trims the stream (approximately, MAXLEN ~): one trim
    -- per claim rather than per entry (1.6 us a timer in BENCHMARKS.md),
    -- and no XTRIM of its own; the script is atomic, so no reader sees the
    -- stream past its bound.
    for i, e in ipairs(events) do
      local trim = maxlen > 0 and i == #events
      local ep = e[5]
      -- "<endpoint>\0<flow key>" for a timer with a flow key (schedule.lua):
      -- the fields endpoint (unless '') and flow. A plain find, so that a
      -- delivering timer without one costs no pattern match.
      local z = ep and string.find(ep, '\0', 1, true)
      if z then
        local flow = string.sub(ep, z + 1)
        ep = string.sub(ep, 1, z - 1)
        if e[4] and ep ~= '' then
          xadd(trim, e[1], e[2], e[3], 'flow', flow, 'traceparent', e[4], 'endpoint', ep)
        elseif e[4] then
          xadd(trim, e[1], e[2], e[3], 'flow', flow, 'traceparent', e[4])
        elseif ep ~= '' then
          xadd(trim, e[1], e[2], e[3], 'flow', flow, 'endpoint', ep)
        else
          xadd(trim, e[1], e[2], e[3], 'flow', flow)
        end
      elseif e[4] and ep then
        xadd(trim, e[1], e[2], e[3], 'traceparent', e[4], 'endpoint', ep)
      elseif e[4] then
        xadd(trim, e[1], e[2], e[3], 'traceparent', e[4])
      elseif ep then
        xadd(trim, e[1], e[2], e[3], 'endpoint', ep)
      else
        xadd(trim, e[1], e[2], e[3])
      end
    end
    redis.call('HSET', KEYS[2], unpack(hset))
    if #traced > 0 then redis.call('HDEL', KEYS[8], unpack(traced)) end
    if #delivering > 0 then redis.call('HDEL', KEYS[10], unpack(delivering)) end
    redis.call('ZADD', KEYS[3], unpack(fired))
    if retention > 0 then
      redis.call('ZADD', KEYS[5], unpack(expire))
    end
    redis.call('HINCRBY', KEYS[7], 'fired', #events)
    redis.call('HINCRBY', KEYS[7], 'late_sum_ms', fmt(late_sum))
    for b, c in pairs(buckets) do
      redis.call('HINCRBY', KEYS[7], b == 0 and 'late_le_inf' or 'late_le_' .. LATE_MS[b], c)
    end
  end
  if #quarantined > 0 then
    local qset, qdel = {}, {}
    for _, b in ipairs(quarantined) do
      qdel[#qdel + 1] = b[1]
      qset[#qset + 1] = b[1]
      qset[#qset + 1] = quarantine_value(now_s, b[2], b[3], b[4])
    end
    redis.call('HSET', KEYS[9], unpack(qset))
    redis.call('HDEL', KEYS[2], unpack(qdel))
    redis.call('HINCRBY', KEYS[7], 'quarantined', #quarantined)
  end
end

return reply
