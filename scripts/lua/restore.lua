-- restore.lua: write timers as an export recorded them, states and times
-- included; leave existing IDs alone.
--
-- KEYS: the shard's seven keys (see includes/check_types.lua), then KEYS[8] its
--       schedules hash (includes/recur_keys.lua), read only, KEYS[9] its
--       timer meta hash, KEYS[10] its owners index and KEYS[11] its
--       owners' epochs (keyspace TimerMeta, Owners, Epochs).
-- ARGV[1]        retention_ms: how long a settled record is kept after it
--                settled; 0 = forever
-- ARGV[2]        wake channel, told the new earliest due_ms when it moves earlier
-- ARGV[3]        the schedule whose occurrences this call may restore before
--                the schedule itself exists ('' for none): RestoreRecurring
--                restores a schedule's exported occurrences, then it
-- ARGV[4]        the shard's pending-timer quota (as schedule.lua): the most
--                timers KEYS[1] may hold once the call restored its
--                scheduled ones; '0' for none
-- ARGV[5+7i..]   septuples: id, state (s, f or c), due (a due score,
--                '<ms>' or '<ms>.<us>', when scheduled; whole ms when
--                settled), created_ms, settled_ms ('' when scheduled),
--                payload, meta (as KEYS[9] keeps it, '' for none): a
--                restored owned timer raises its owner's epoch on the
--                shard to at least its own, so that later timers of the
--                owner never record a lower one
-- Reply: {created_1, record_1, meta_1, created_2, record_2, meta_2, ...};
--        created is 1 for a restored timer and 0 when the ID already
--        existed in any state (or earlier in this call), whose record and
--        meta (as KEYS[9] keeps it, '' for none) are returned unchanged:
--        the meta is the one the timer has, not the one this call gave it.
--        A new timer whose ID has an occurrence's form, "<schedule>@<1-15
--        digits>", while that schedule neither exists nor is ARGV[3], is an
--        error TIMERQ_OCCURRENCE naming it, and nothing is written: a later
--        schedule of that ID would adopt it as its own occurrence.
--        A call whose scheduled timers would take KEYS[1] past ARGV[4] is
--        refused whole: 'TIMERQ_QUOTA pending <quota> <held> <adding>',
--        and nothing written (settled timers count for nothing).
-- Complexity: O(k log N) for k timers in a set of N.
--
-- A scheduled timer goes into the due set with its due time and creation
-- time. A settled timer is written settled: its record, its entry in the
-- fired or cancelled set, and its retention entry (purge at settled_ms +
-- retention, as in the namespace it came from). It never enters the due set,
-- gets no fire-stream entry and no wakeup on its channel: it fired (or was
-- cancelled) in the namespace it was exported from, and the consumers of
-- this one must not see it again.
--
-- It runs in the three phases of includes/probe.lua: every check and read, then a
-- no-op probe of every write (ZADD first, so that Redis refuses a restore
-- under OOM), then the one PUBLISH and the writes. A malformed argument, a
-- key of the wrong type, a missing right or a refused PUBLISH leaves the
-- namespace untouched: all or nothing.

local err = check_types() or check_type(KEYS[8], 'hash') or check_type(KEYS[9], 'hash') or
  check_type(KEYS[10], 'zset') or check_type(KEYS[11], 'hash')
if err then return err end

local retention = tonumber(ARGV[1])
local sets = {s = KEYS[1], f = KEYS[3], c = KEYS[4]}
wake_start()

local reply, seen, seen_meta = {}, {}, {}
local hset, zadd, expire = {}, {s = {}, f = {}, c = {}}, {}
local allowed = ARGV[3]
local metas, owned, epochs = {}, {}, {} -- HSET and ZADD lists; owner -> epoch to raise to
for i = 5, #ARGV, 7 do
  local id, state, due, created, settled, payload, meta =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  local epoch, owner = nil, nil
  if meta and meta ~= '' then
    epoch, owner = string.match(meta, '^(%d+)\31%d*\31([^\31]*)')
  end
  if not sets[state] or meta == nil or (meta ~= '' and not epoch) or not (state == 's' and is_due(due) or string.match(due, '^%d+$')) or
      not string.match(created, '^%d+$') or not string.match(settled, '^%d*$') or
      (state == 's') ~= (settled == '') then
    return redis.error_reply('ERR timerq restore: malformed arguments for timer ' .. id)
  end
  local rec, stored = seen[id], seen_meta[id]
  if not rec then
    rec = redis.call('HGET', KEYS[2], id)
    if rec then
      rec = full(id, rec)
      -- Its owner, labels, epoch and deadline, which a caller told the
      -- timer exists would otherwise read as none.
      stored = redis.call('HGET', KEYS[9], id) or ''
    end
  end
  if rec then
    reply[#reply + 1] = 0
  else
    -- The last '@' followed by 1-15 digits to the end, as
    -- keyspace.SplitOccurrence reads it.
    local sid, digits = string.match(id, '^(.+)@(%d+)$')
    if sid and #digits <= 15 and sid ~= allowed and not redis.call('HGET', KEYS[8], sid) then
      return redis.error_reply('TIMERQ_OCCURRENCE timer "' .. id .. '" has the ID of an occurrence of schedule "' ..
        sid .. '", which does not exist; nothing was written')
    end
    if state == 's' then
      hset[#hset + 1] = id
      hset[#hset + 1] = encode('s', '', created, '', payload)
      wake_consider(due)
    else
      hset[#hset + 1] = id
      hset[#hset + 1] = encode(state, due, created, settled, payload)
      if LAYOUT == 1 and retention > 0 then
        expire[#expire + 1] = fmt(tonumber(settled) + retention)
        expire[#expire + 1] = id
      end
    end
    local z = zadd[state]
    z[#z + 1] = state == 's' and due or settled_score(state, due, settled)
    z[#z + 1] = id
    if epoch then
      metas[#metas + 1] = id
      metas[#metas + 1] = meta
      if owner ~= '' then
        owned[#owned + 1] = '0'
        owned[#owned + 1] = owner .. '\0' .. id
        local have = epochs[owner] or tonumber(redis.call('HGET', KEYS[11], owner) or '0')
        epochs[owner] = math.max(have, tonumber(epoch))
      end
    end
    rec = encode(state, due, created, settled, payload)
    stored = epoch and meta or ''
    seen[id], seen_meta[id] = rec, stored
    reply[#reply + 1] = 1
  end
  reply[#reply + 1] = rec
  reply[#reply + 1] = stored
end

if #hset == 0 then return reply end
local quota = tonumber(ARGV[4])
if quota > 0 and #zadd.s > 0 then
  err = over_quota('pending', quota, redis.call('ZCOUNT', KEYS[1], '-inf', PENDING_END), #zadd.s / 2)
  if err then return err end
end

-- Phase 2: probes, a ZADD first.
local probes = {}
for _, state in ipairs({'s', 'f', 'c'}) do
  if #zadd[state] > 0 then probes[#probes + 1] = {'ZADD', sets[state]} end
end
probes[#probes + 1] = {'HSET', KEYS[2]}
if #expire > 0 then probes[#probes + 1] = {'ZADD', KEYS[5]} end
if #metas > 0 then probes[#probes + 1] = {'HSET', KEYS[9]} end
if #owned > 0 then
  probes[#probes + 1] = {'ZADD', KEYS[10]}
  probes[#probes + 1] = {'HSET', KEYS[11]}
end
err = probe_all(probes)
if err then return err end

-- Phase 3: publish, then write.
err = wake_publish(ARGV[2])
if err then return err end
redis.call('HSET', KEYS[2], unpack(hset))
for state, z in pairs(zadd) do
  if #z > 0 then redis.call('ZADD', sets[state], unpack(z)) end
end
if #expire > 0 then
  redis.call('ZADD', KEYS[5], unpack(expire))
end
if #metas > 0 then redis.call('HSET', KEYS[9], unpack(metas)) end
if #owned > 0 then
  redis.call('ZADD', KEYS[10], unpack(owned))
  local raise = {}
  for owner, epoch in pairs(epochs) do
    raise[#raise + 1] = owner
    raise[#raise + 1] = fmt(epoch)
  end
  redis.call('HSET', KEYS[11], unpack(raise))
end
return reply
