-- claim.lua: fire up to ARGV[1] due timers, atomically and exactly once.
--
-- KEYS: the namespace's seven keys, then its traces hash (see includes/check_types.lua),
--       then KEYS[9] its quarantine hash (includes/quarantine.lua),
--       then KEYS[10] its deliveries hash: id -> endpoint name (schedule.lua),
--       then KEYS[11] its timer meta hash (keyspace TimerMeta), read only
--       but for a quarantined timer's meta, which the claim deletes,
--       then KEYS[12] its owner index (keyspace Owners), written only to
--       delete a quarantined timer's entry
-- ARGV[1] limit: most timers to claim (1..1000)
-- ARGV[2] retention_ms: how long fired records are kept; 0 keeps them forever
-- ARGV[3] stream_maxlen: approximate bound of the fire stream; 0 = unbounded
-- ARGV[4] channel prefix: a fired timer's wakeup goes to prefix .. id
-- Reply: {now, earliest_score_or_empty, q, qid_1, qreason_1, ..., qid_q,
--        qreason_q, id_1, due_1, payload_1, traceparent_1, id_2, ...}: now
--        is the server clock as '<now_ms>.<us>' (us 000-999), the q
--        records this claim quarantined, then the fired timers; every timer
--        of one claim has fired_at = now_ms; traceparent is '' for a timer
--        scheduled outside a trace.
-- Complexity: O(log N + k) for k claimed timers in a set of N, plus one
--        PUBLISH and one XADD per claimed timer (the last one trimming the
--        stream), and a few HINCRBYs (the counters) per claim; when some
--        timer was traced or delivers, one HMGET of k fields and one HDEL
--        more per hash; when q > 0 records are quarantined, one TYPE of
--        the meta hash and, when it exists, one HMGET of q fields, and an
--        HDEL and a ZREM for those with meta.
--
-- A traced timer's traceparent (KEYS[8], written by schedule.lua) moves
-- into its fire stream entry, as the field traceparent, so that a consumer
-- continues the trace that scheduled it. Likewise a delivering timer's
-- endpoint name (KEYS[10], with the timer's own URL after a space if it has
-- one) moves into its entry as the field endpoint, so that a dispatcher
-- finds the endpoint to deliver it to; a value "<endpoint>\0<flow key>" (a
-- timer with a flow key) becomes the fields endpoint (unless '') and flow
-- (the fire writer, includes/fire.lua, which commit.lua shares).
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
-- quarantined counts it. Its meta (KEYS[11]) and owner index entry
-- (KEYS[12]) are deleted with it, as the timer is gone (includes/quarantine.lua):
-- one TYPE, an HMGET and their deletes more, only in a claim that
-- quarantines. The timers beside it fire as usual. Only decode
-- decides what is malformed, so a record timerq wrote is never moved.
--
-- The counters (KEYS[7]) record every fire in Redis, so that metrics count
-- the timers of a claim whose reply never reached its worker: fired, the
-- summed lateness (now_ms - due_ms) in late_sum_ms, and per lateness bucket
-- late_le_<ms> the timers with a lateness above the previous bound and at
-- most <ms> (late_le_inf above the last; the bounds are
-- includes/late_field.lua, which queue.LatenessBuckets mirrors).

-- The clock as a due score, with TIME's microseconds, for the comparison
-- with the due scores (clock_due) and for the reply; now_ms follows below,
-- when something is due.
local now_due = clock_due(redis.call('TIME'))

-- Arguments go to Redis as strings where the script has them: Redis 7.0
-- formats each number argument of a call with snprintf, which costs about
-- as much as a cheap command.
local due = redis.pcall('ZRANGEBYSCORE', KEYS[1], '-inf', now_due, 'WITHSCORES', 'LIMIT', '0', ARGV[1])
local n = #due / 2
local reply = {now_due, '', '0'}
-- The earliest due time left after the claim: the member ranked just
-- after the n claimed ones, read before the writes so that nothing runs
-- after them.
if not due.err and n == 0 then
  -- Nothing due, the most common claim: it answers here, before the
  -- includes it does not need are defined (Script.Early).
  local head = pending_at('0')
  if head[2] then reply[2] = head[2] end
  return reply
end
-- (the includes are defined here)

-- The key types are checked by the commands themselves, not by a TYPE of
-- each key per call: most claims find nothing due and then only read the
-- due set, whose type ZRANGEBYSCORE checks. A claim that fires checks the
-- type of every key it writes before its first write: the timers hash by
-- HMGET, the fired and expire sets by their probes, the traces and
-- deliveries by one EXISTS of both and, when one exists, their HMGETs
-- (fire_read), the counters by TYPE, as their probes fail on arguments
-- before looking at the key, and the stream by its first XADD, which is
-- the claim's first write: run under pcall after every probe and PUBLISH,
-- a refusal of it leaves every key as it was (a TYPE more cost a firing
-- claim about 5,000 instructions; BENCHMARKS.md, "Layout 2's claim,
-- leaner"). typed turns a WRONGTYPE from any of them into check_types'
-- reply, which names the key.
-- err is a pcall's error table, and cmd and key say what it ran; without
-- them, err is an error reply already made (by probe_all).
-- access is what cmd does to key, 'read' unless said.
local function typed(err, cmd, key, access)
  local msg = string.gsub(err.err, '^%-', '')
  if string.sub(msg, 1, 9) == 'WRONGTYPE' then return check_types() or redis.error_reply(msg) end
  if not cmd then return err end
  return refusal(msg, cmd, key, access or 'read')
end

if due.err then return typed(due, 'ZRANGEBYSCORE', KEYS[1]) end
-- now_ms, floored: now_due without its '.' and last three digits (the
-- microseconds below the millisecond), as a string and a number.
local now_s = string.sub(now_due, 1, -5)
local now = tonumber(now_s)
local n_s = fmt(n)
local head = pending_at(n_s)
if head[2] then reply[2] = head[2] end
if n > 0 then
  -- Phase 1: read and check every record.
  -- (one timer, the common claim, without a table of its ID)
  local recs
  if n == 1 then
    recs = redis.pcall('HMGET', KEYS[2], due[1])
  else
    local ids = {}
    for i = 1, n do ids[i] = due[2 * i - 1] end
    recs = redis.pcall('HMGET', KEYS[2], unpack(ids))
  end
  if recs.err then return typed(recs, 'HMGET', KEYS[2]) end
  local err = check_type(KEYS[7], 'hash')
  if err then return err end
  local counts = counters_batch()
  local f = fire_batch(now, tonumber(ARGV[2]), KEYS[10], counts, now_s, KEYS[11])
  local quarantined = nil -- {{id, score, reason, rec}, ...} once there is one
  for i = 1, n do
    local id, rec, score = due[2 * i - 1], recs[i], due[2 * i]
    -- A due member without a record, or with a settled one, is not a
    -- timer to fire: the claim only drops it from the due set.
    if rec then
      -- A scheduled record with a created time of at most 14 digits
      -- (always at most MAX_MS), the one a claim fires, by one match that
      -- also takes its payload; every other record by decode, which
      -- decides the same for this one.
      local state, created, payload = 's', string.match(rec, '^s::(%d+)::(.*)$')
      if not created or #created > 14 then
        local _
        state, _, created, _, payload = decode(rec)
      end
      -- A fired timer's due time is its score's millisecond (ms_of), as
      -- its fire time is TIME's: due_ms <= now_ms follows from the score
      -- being at or below now_due.
      local due_s = score_ms_of(score)
      local why = quarantine_why(state, due_s)
      if why then
        quarantined = quarantined or {}
        quarantined[#quarantined + 1] = {id, score, why, rec}
      elseif state == 's' then
        fire_add(f, id, due_s, created, payload)
      end
    end
  end
  err = (quarantined and quarantine_check(quarantined, counts, KEYS[11], KEYS[12], KEYS[8], KEYS[10])) or fire_read(f)
  if err then return err end
  if quarantined then quarantine_reply(quarantined, reply, 3) end
  fire_reply(f, reply)

  -- Phase 2: probes. ZREMRANGEBYRANK goes first: Redis does not refuse it
  -- under OOM, and no write after it, so a full Redis still fires timers.
  err = probe('ZREMRANGEBYRANK', KEYS[1]) or fire_probes(f, true) or (quarantined and quarantine_probes(quarantined)) or
    counters_probes(counts)
  if err then return typed(err) end

  -- Phase 3: publish, then write.
  err = fire_publish(f, ARGV[4])
  if err then return err end
  -- The stream entries first: the first XADD is the stream's type check
  -- (above) and its probe, of the ACL too (fire_probes left it out), so it
  -- runs under pcall before any other write.
  -- The last entry trims the stream (approximately, MAXLEN ~): one trim
  -- per claim rather than per entry (1.6 us a timer in BENCHMARKS.md),
  -- and no XTRIM of its own; the script is atomic, so no reader sees the
  -- stream past its bound.
  local events = f.events
  local last = #events
  if tonumber(ARGV[3]) <= 0 then last = 0 end
  for i = 1, #events do
    local r
    if i == last then
      r = redis.pcall('XADD', KEYS[6], 'MAXLEN', '~', ARGV[3], '*', fire_fields(f, events[i]))
    else
      r = redis.pcall('XADD', KEYS[6], '*', fire_fields(f, events[i]))
    end
    if type(r) == 'table' and r.err then
      -- Only the first can be refused: it found the stream's type, and
      -- nothing in Redis refuses a write after a script's first.
      if i == 1 then return typed(r, 'XADD', KEYS[6], 'write') end
      return redis.error_reply(r.err)
    end
  end
  -- The due members are exactly the lowest ranks, so removing by rank is
  -- O(log N + n) instead of n separate ZREMs. In layout 2 the fired ones
  -- leave the due times when fire_write_rest moves them to the fired band,
  -- so only a claim with members that do not fire removes (all n, before
  -- the fired ones go to the band).
  if LAYOUT == 1 or #events < n then redis.call('ZREMRANGEBYRANK', KEYS[1], '0', fmt(n - 1)) end
  fire_write_rest(f)
  if quarantined then quarantine_write(quarantined, f.now_s) end
  counters_write(counts)
end

return reply
