-- debounce_restore.lua: write a debounce window's timer as an export
-- recorded it, state and times included, and reopen its window while the
-- window's deadline is ahead; leave an existing ID alone.
--
-- KEYS: the shard's seven keys (see includes/check_types.lua), then
--   KEYS[8] schedules  HASH   the shard's recurring schedules, read only: a
--                             key that is a schedule's ID here is refused
--   KEYS[9] window     STRING the key's open window (debounce.lua)
--   KEYS[10..12] the shard's timer meta hash, owner index and owners'
--                epochs (keyspace TimerMeta, Owners, Epochs), as restore.lua
-- ARGV[1] retention_ms: how long a settled record is kept after it settled;
--         0 = forever
-- ARGV[2] wake channel, told the new earliest due_ms when it moves earlier
-- ARGV[3] debounce key K (validated by the client)
-- ARGV[4] the window's deadline_ms while it was open, '' for a closed one
-- ARGV[5..10] the timer: id ("K@<opened_ms>"), state (s, f or c), due_ms,
--         created_ms, settled_ms ('' when scheduled), payload
-- ARGV[11] the timer's meta, as KEYS[10] keeps it and export recorded it
--         ('' for none): "<epoch>\31<deadline ms>\31<owner>" and
--         "\31<key>=<value>" per label. A restored owned timer raises its
--         owner's epoch on the shard (KEYS[12]) to at least its own, so
--         that later timers of the owner never record a lower one.
-- Reply: {created, record, reopened, meta}: created is 1 for a restored
--        timer and 0 when the ID already existed in any state (its record
--        and meta returned unchanged, the window untouched: the meta is the
--        one the timer has, not ARGV[11]); reopened is 1 when the call set
--        the key's window string; meta as KEYS[10] keeps it, '' for none.
--        Or {'schedule'}: K is a recurring schedule's ID in this namespace,
--        so its timers "K@<ms>" are that schedule's occurrences; nothing
--        written.
-- Complexity: O(log N) for a set of N.
--
-- The timer is written as restore.lua writes one: a scheduled timer into
-- the due set, a settled one settled, with its retention, no fire-stream
-- entry and no wakeup, and its meta with its owner-index entry. The
-- window reopens ("<opened_ms>:<deadline_ms>", expiring at the deadline,
-- as debounce.lua writes it) only for a new scheduled timer whose
-- deadline is after the server's clock, and only while the key has no
-- window string of its own: a window opened here first stays the key's
-- window, and the restored timer fires as a plain timer. Otherwise the
-- next Debounce of K opens a new window, as after a fire.
--
-- It runs in the three phases of includes/probe.lua: every check and read, then a
-- no-op probe of every write (ZADD first, so that Redis refuses it under
-- OOM), then the one PUBLISH and the writes. A refusal writes nothing.

local err = check_types() or check_type(KEYS[8], 'hash') or check_type(KEYS[9], 'string') or
  check_type(KEYS[10], 'hash') or check_type(KEYS[11], 'zset') or check_type(KEYS[12], 'hash')
if err then return err end

-- Phase 1: read and check.
local retention = tonumber(ARGV[1])
local key, deadline = ARGV[3], ARGV[4]
local id, state, due, created, settled, payload, meta = ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local sets = {s = KEYS[1], f = KEYS[3], c = KEYS[4]}
local opened = id and string.match(id, '^.+@(%d+)$')
local epoch, owner = nil, nil
if meta and meta ~= '' then
  epoch, owner = string.match(meta, '^(%d+)\31%d*\31([^\31]*)')
end
if not opened or #opened > 15 or string.sub(id, 1, #key + 1) ~= key .. '@' or #id ~= #key + 1 + #opened or
    meta == nil or (meta ~= '' and not epoch) or
    not sets[state] or payload == nil or not (state == 's' and is_due(due) or string.match(due, '^%d+$')) or
    not string.match(created, '^%d+$') or not string.match(settled, '^%d*$') or
    (state == 's') ~= (settled == '') or not string.match(deadline, '^%d*$') or #deadline > 15 then
  return redis.error_reply('ERR timerq debounce restore: malformed arguments for timer ' .. tostring(id) ..
    ' of debounce key ' .. tostring(key))
end
if redis.call('HGET', KEYS[8], key) then
  return {'schedule'}
end
local rec = redis.call('HGET', KEYS[2], id)
if rec then
  -- With its owner, labels, epoch and deadline, which a caller told the
  -- timer exists would otherwise read as none.
  return {0, full(id, rec), 0, redis.call('HGET', KEYS[10], id) or ''}
end
-- The owner's epoch on this shard, raised to the timer's when lower.
local raise = nil
if owner and owner ~= '' and tonumber(epoch) > tonumber(redis.call('HGET', KEYS[12], owner) or '0') then
  raise = epoch
end
local reopen = false
if state == 's' and deadline ~= '' and tonumber(deadline) > now_ms() then
  reopen = not redis.call('GET', KEYS[9])
end
wake_start()
local probes = {{'ZADD', sets[state]}, {'HSET', KEYS[2]}}
if LAYOUT == 1 and state ~= 's' and retention > 0 then probes[#probes + 1] = {'ZADD', KEYS[5]} end
if reopen then probes[#probes + 1] = {'SET', KEYS[9]} end
if epoch then probes[#probes + 1] = {'HSET', KEYS[10]} end
if owner and owner ~= '' then probes[#probes + 1] = {'ZADD', KEYS[11]} end
if raise then probes[#probes + 1] = {'HSET', KEYS[12]} end
if state == 's' then wake_consider(due) end

-- Phase 2: probes, a ZADD first.
err = probe_all(probes)
if err then return err end

-- Phase 3: publish, then write.
err = wake_publish(ARGV[2])
if err then return err end
if state == 's' then
  redis.call('HSET', KEYS[2], id, encode('s', '', created, '', payload))
else
  redis.call('HSET', KEYS[2], id, encode(state, due, created, settled, payload))
  if LAYOUT == 1 and retention > 0 then redis.call('ZADD', KEYS[5], fmt(tonumber(settled) + retention), id) end
end
redis.call('ZADD', sets[state], state == 's' and due or settled_score(state, due, settled), id)
if reopen then
  redis.call('SET', KEYS[9], opened .. ':' .. deadline, 'PXAT', deadline)
end
if epoch then
  redis.call('HSET', KEYS[10], id, meta)
  if owner ~= '' then redis.call('ZADD', KEYS[11], 0, owner .. '\0' .. id) end
end
if raise then redis.call('HSET', KEYS[12], owner, fmt(tonumber(raise))) end
local r = 0
if reopen then r = 1 end
return {1, encode(state, due, created, settled, payload), r, epoch and meta or ''}
