-- debounce.lua: debounce a key. Create the timer of the key's window, due
-- delay after the server's clock, or push the open window's timer back to
-- that, but never beyond the window's deadline: its opening plus max wait.
--
-- KEYS: the shard's seven keys (see includes/check_types.lua), then
--   KEYS[8] schedules  HASH   the shard's recurring schedules: a debounce key
--                             must not be a schedule's ID, since both own
--                             the timer IDs "<id>@<ms>"
--   KEYS[9] window     STRING the key's open window (keyspace
--                             Space.Debounce): "<opened_ms>:<deadline_ms>",
--                             expiring at the deadline
--   KEYS[10] traces    HASH   the shard's traces (includes/check_types.lua)
--   KEYS[11] deliveries HASH  the shard's deliveries (id -> endpoint name)
--   KEYS[12] endpoint names HASH (keyspace EndpointNames, as schedule.lua)
--   KEYS[13..15] the shard's timer meta hash, owner index and owners'
--                epochs (keyspace TimerMeta, Owners, Epochs; includes/meta.lua)
--   KEYS[16] meta       HASH   with one shard only: the namespace's meta
--                             key; once it says more shards the call is
--                             refused, 'TIMERQ_RELAYOUT <shards>' and
--                             nothing written (as schedule.lua)
-- ARGV[1] debounce key K (validated by the client)
-- ARGV[2] delay_ms, 1 .. max_wait_ms
-- ARGV[3] max_wait_ms, delay_ms .. MAX_WAIT_MS (one year)
-- ARGV[4] payload
-- ARGV[5] '1' to keep the window's first payload, '0' for the newest to win
-- ARGV[6] wake channel, told the new earliest due_ms when it moves earlier
-- ARGV[7] traceparent of the calling span, kept in KEYS[10] for a window's
--         timer by the call that opens the window; '' for none
-- ARGV[8] endpoint the fire is delivered to ('' for none; after a space,
--         a delivery URL of the timer's own, kept whole): set with the
--         payload (by the call that opens the window, and by a push
--         unless ARGV[5] keeps the first payload, which keeps its
--         endpoint too). A name KEYS[12] does not hold is refused: the
--         error 'TIMERQ_NOENDPOINT <name>', nothing written.
-- ARGV[9] the shard's pending-timer quota (as schedule.lua; '0' for none):
--         a call that opens a window when KEYS[1] holds that many timers
--         is refused, 'TIMERQ_QUOTA pending <quota> <held> 1', nothing
--         written; a push adds no timer, and is never refused.
-- ARGV[10] the window timer's owner and labels, as includes/meta.lua
--         takes them ('' for none): set by the call that opens the window
--         (with its owner's epoch then); a push leaves them
-- Reply: {outcome, id, record, now_ms, deadline_ms}. outcome is 'created'
--        (a new window: its timer id, "K@<opened_ms>", was created), 'pushed'
--        (the open window's timer is now due delay after now_ms) or
--        'capped' (it is due at deadline_ms, sooner than that), with the
--        timer's record; or 'schedule' (K is a recurring schedule's ID,
--        nothing written; id, record and deadline_ms are ''). A window's
--        timer with an owner or labels adds its stored meta (KEYS[13]), the
--        opening call's: a push reads it, and leaves it.
-- Complexity: O(log N) for a set of N (plus an HEXISTS of the endpoint
--        names when ARGV[8] is set, and on a push that sets the payload an
--        HGET of the deliveries).
--
-- A window is open while its timer is scheduled and the server's clock is
-- before its deadline. Otherwise (it fired, was cancelled, or its deadline
-- passed) the call opens the next window: its ID is K@<now_ms>, or one
-- millisecond later than the last window's (if the clock went back) and
-- than any existing timer's of that form, so a window's ID is never reused.
-- The timer's record is an ordinary scheduled one (created_ms is the
-- window's opening): a push is one ZADD of the due set, which is all the
-- claim reads, so the timer fires once, at its last due time.
--
-- It runs in the three phases of includes/probe.lua, so a refusal (ACL, OOM) writes
-- nothing.

local MAX_WAIT_MS = 31536000000 -- 365 days; queue.MaxDebounceWait

local err = check_types()
if err then return err end
err = check_type(KEYS[8], 'hash') or check_type(KEYS[9], 'string') or check_type(KEYS[10], 'hash') or
  check_type(KEYS[11], 'hash') or check_type(KEYS[12], 'hash')
if err then return err end
if KEYS[16] then
  local shards = redis.call('HGET', KEYS[16], 'shards')
  if shards and shards ~= '1' then return redis.error_reply('TIMERQ_RELAYOUT ' .. shards) end
end

-- Phase 1: read and check.
local key, payload, keep = ARGV[1], ARGV[4], ARGV[5] == '1'
local tp, endpoint = ARGV[7] or '', ARGV[8] or ''
local delay_s, wait_s = ARGV[2], ARGV[3]
local delay, wait
if string.match(delay_s, '^%d+$') and string.match(wait_s, '^%d+$') and #delay_s <= 15 and #wait_s <= 15 then
  delay, wait = tonumber(delay_s), tonumber(wait_s)
end
if not delay or delay < 1 or wait < delay or wait > MAX_WAIT_MS then
  return redis.error_reply('ERR timerq: debounce delay "' .. delay_s .. '" and max wait "' .. wait_s ..
    '" must be milliseconds with 1 <= delay <= max wait <= ' .. fmt(MAX_WAIT_MS))
end

-- Only the name is checked: a value 'name url' (a timer's own delivery
-- URL after a space, as schedule.lua takes it) is kept whole.
local ep_name = string.match(endpoint, '^[^ ]*')
if endpoint ~= '' and redis.call('HEXISTS', KEYS[12], ep_name) == 0 then
  return redis.error_reply('TIMERQ_NOENDPOINT ' .. ep_name)
end

-- One TIME for now_ms and the due time: resolve_due counts from
-- relative_base while relative_for is this call's ARGV (else it reads TIME
-- again, a later clock than now_ms).
relative_base, relative_for = redis.call('TIME'), ARGV
local now = clock_ms(relative_base)
local due = tonumber(resolve_due('+' .. delay_s .. '.000'))

local win = redis.call('GET', KEYS[9])
local opened, deadline
if win then
  local o, d = string.match(win, '^(%d+):(%d+)$')
  if not o or not is_ms(o) or not is_ms(d) then
    return layout_marker(KEYS[9], 'string') or redis.error_reply('TIMERQ_MALFORMED debounce window ' .. KEYS[9] .. ' holds "' ..
      string.gsub(win, '%c', '?') .. '", not "<opened_ms>:<deadline_ms>", so timerq changed nothing;' ..
      ' something other than timerq wrote it: inspect it (GET), then remove it (DEL)')
  end
  opened, deadline = tonumber(o), tonumber(d)
end

wake_start()
if opened and now < deadline then
  local id = key .. '@' .. fmt(opened)
  local rec = redis.call('HGET', KEYS[2], id)
  local state, created, first
  if rec then
    local st, _, cr, _, pl = decode(rec)
    state, created, first = st, cr, pl
    if not state then return malformed(id, 'has a malformed record') end
    if state == 's' and not due_of(id) then
      return malformed(id, 'is scheduled but has no due time in ' .. KEYS[1])
    end
  end
  if state == 's' then
    local outcome = 'pushed'
    if due > deadline then due, outcome = deadline, 'capped' end
    wake_consider(due)
    local body = payload
    if keep then body = first end
    -- The endpoint goes with the payload: a push that sets the payload
    -- sets it (or removes it, for a call without one).
    local ep_write
    if not keep and (redis.call('HGET', KEYS[11], id) or '') ~= endpoint then
      if endpoint == '' then ep_write = 'HDEL' else ep_write = 'HSET' end
    end
    -- The window's owner, labels and epoch, which the opening call set
    -- and a push leaves: the reply carries them, as a created window's.
    err = check_type(KEYS[13], 'hash')
    if err then return err end
    local stored = redis.call('HGET', KEYS[13], id)
    -- Phase 2: probes; ZADD first, so that Redis refuses a push under OOM.
    local probes = {{'ZADD', KEYS[1]}}
    if body ~= first then probes[#probes + 1] = {'HSET', KEYS[2]} end
    if ep_write then probes[#probes + 1] = {ep_write, KEYS[11]} end
    err = probe_all(probes)
    if err then return err end
    -- Phase 3: publish, then write.
    err = wake_publish(ARGV[6])
    if err then return err end
    redis.call('ZADD', KEYS[1], fmt_due(due), id)
    if body ~= first then redis.call('HSET', KEYS[2], id, encode('s', '', created, '', body)) end
    if ep_write == 'HSET' then
      redis.call('HSET', KEYS[11], id, endpoint)
    elseif ep_write == 'HDEL' then
      redis.call('HDEL', KEYS[11], id)
    end
    local reply = {outcome, id, encode('s', fmt_due(due), created, '', body), fmt(now), fmt(deadline)}
    if stored then reply[6] = stored end
    return reply
  end
end

-- The next window.
if redis.call('HEXISTS', KEYS[8], key) == 1 then
  return {'schedule', '', '', fmt(now), ''}
end
local n = now
if opened and n <= opened then n = opened + 1 end
local id = key .. '@' .. fmt(n)
local taken = 0
while redis.call('HEXISTS', KEYS[2], id) == 1 do
  taken = taken + 1
  if taken > 1000 then
    return redis.error_reply('ERR timerq: the timers ' .. key .. '@' .. fmt(now) .. ' to ' .. id ..
      ' all exist, so debounce key "' .. key .. '" has no free window ID; something other than timerq wrote them')
  end
  n = n + 1
  id = key .. '@' .. fmt(n)
end
local quota = tonumber(ARGV[9] or '0') or 0
if quota > 0 then
  err = over_quota('pending', quota, redis.call('ZCOUNT', KEYS[1], '-inf', PENDING_END), 1)
  if err then return err end
end
deadline = now + wait
if due > deadline then due = deadline end
wake_consider(due)
local metas = meta_batch(KEYS[13], KEYS[14], KEYS[15])
if (ARGV[10] or '') ~= '' then
  local _, merr = meta_add(metas, id, fmt_due(due), ARGV[10])
  if merr then return merr end
end
err = meta_check(metas)
if err then return err end

-- Phase 2: probes; ZADD first, so that Redis refuses a debounce under OOM.
local probes = {{'ZADD', KEYS[1]}, {'HSET', KEYS[2]}, {'SET', KEYS[9]}}
if tp ~= '' then probes[#probes + 1] = {'HSET', KEYS[10]} end
if endpoint ~= '' then probes[#probes + 1] = {'HSET', KEYS[11]} end
err = probe_all(probes) or meta_probes(metas)
if err then return err end

-- Phase 3: publish, then write.
err = wake_publish(ARGV[6])
if err then return err end
local now_s = fmt(now)
redis.call('HSET', KEYS[2], id, encode('s', '', now_s, '', payload))
redis.call('ZADD', KEYS[1], fmt_due(due), id)
redis.call('SET', KEYS[9], fmt(n) .. ':' .. fmt(deadline), 'PXAT', fmt(deadline))
if tp ~= '' then redis.call('HSET', KEYS[10], id, tp) end
if endpoint ~= '' then redis.call('HSET', KEYS[11], id, endpoint) end
meta_write(metas)
local reply = {'created', id, encode('s', fmt_due(due), now_s, '', payload), now_s, fmt(deadline)}
if metas.hset then reply[6] = metas.hset[2] end
return reply
