-- prelude.lua: helpers shared by every timerq script. The table of scripts
-- (scripts.go) prepends it to each script before loading, so every script
-- sees these locals.
--
-- Every script's keys share one hash tag, so that a script never crosses a
-- Cluster slot. Most scripts receive the same seven keys of one shard
-- (the others say which keys they take; the helpers that use KEYS[1..7]
-- are for the seven):
--   KEYS[1] due        ZSET  id -> due_ms, scheduled timers only
--   KEYS[2] timers     HASH  id -> record (see encode below)
--   KEYS[3] fired      ZSET  id -> due_ms, fired timers awaiting purge
--   KEYS[4] cancelled  ZSET  id -> due_ms, cancelled timers awaiting purge
--   KEYS[5] expire     ZSET  id -> purge_at_ms, settled timers with a retention
--   KEYS[6] fires      STREAM one entry per fired timer
--   KEYS[7] counters   HASH  totals recorded by claim.lua, never purged:
--                      fired (timers fired), late_sum_ms (their summed
--                      lateness) and late_le_<ms> / late_le_inf (how many
--                      fired with a lateness in that bucket; see claim.lua)
--
-- schedule, claim and purge take an eighth key (other scripts put their own
-- extra keys there, so the seven above stay the common part):
--   KEYS[8] traces     HASH  id -> W3C traceparent of the span that scheduled
--                      the timer, only for a timer scheduled inside a sampled
--                      trace and only while it is scheduled: claim moves it
--                      into the timer's fire stream entry, purge drops a
--                      cancelled timer's (see check_traces)
--
-- Numbers are formatted with '%.0f', never tostring or '..': real Redis
-- prints Lua numbers with %.14g, which would corrupt a 15-digit millisecond
-- timestamp (any instant after 2286).
--
-- Nothing half-done. Redis does not roll a script back: when a command
-- fails, the writes before it stay. And Redis refuses commands inside a
-- script one at a time: ACL rights (the command, its keys, its channel) at
-- every call; OOM, READONLY and MISCONF only at the script's first write
-- command (OOM only if that command may grow memory), never after it. So
-- every script that writes runs in three phases:
--   1. reads and checks: key types, arguments, and every record it will
--      rewrite (a malformed record is an error here, not a Lua error later);
--   2. probes (probe below): each write command it will run, on each key it
--      will write, in a form that changes nothing, so that Redis applies
--      every refusal before anything changed. The first probe decides the
--      OOM policy: schedule, cancel and reschedule start with ZADD, which
--      Redis refuses under OOM; claim and purge start with ZREMRANGEBYRANK,
--      which it does not, so timers keep firing and purges free memory;
--   3. the PUBLISHes (a PUBLISH cannot be probed without sending a message),
--      then the writes, none of which Redis can refuse any more.
-- A refusal in phases 1-3 leaves every key untouched. At worst some of the
-- phase 3 messages went out before a later PUBLISH was refused: readers
-- treat a message as a hint to re-read the state, never as the state.

local KEY_TYPES = {'zset', 'hash', 'zset', 'zset', 'zset', 'stream', 'hash'}

local function fmt(n)
  return string.format('%.0f', n)
end

-- clock_ms is a TIME reply in whole milliseconds, floored.
local function clock_ms(t)
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- now_ms is the Redis server's clock: the only clock timerq trusts.
local function now_ms()
  return clock_ms(redis.call('TIME'))
end

-- Due scores are milliseconds with the microseconds as a fraction,
-- '<ms>' or '<ms>.<us>' (us 3 digits, 001-999), so that a timer is due at
-- its microsecond rather than at the next whole millisecond. A whole-ms
-- score, all that older versions wrote, is one of them. Everything else
-- (records, the fired, cancelled and expire sets, the stream, counters)
-- keeps whole milliseconds; a settled timer's due time is its score's
-- millisecond, floored, as the fire time is TIME's.

-- clock_due is a TIME reply as a due score string: what a score is
-- compared with to decide "is it due" (a score at or below it is). A
-- script that also writes a fire time takes both from one TIME reply
-- (clock_ms and clock_due): from two, the second may be in the next
-- millisecond, and a timer due in it would be written as fired before its
-- due time.
local function clock_due(t)
  return fmt(clock_ms(t)) .. '.' .. string.format('%03d', tonumber(t[2]) % 1000)
end

-- fmt_due formats a due time in ms (a number, maybe fractional) as a due
-- score string, rounded to the microsecond: a score written as '<ms>.<us>'
-- is the double nearest it, which rounds back to the same digits.
local function fmt_due(d)
  local ms = math.floor(d)
  local us = math.floor((d - ms) * 1000 + 0.5)
  if us >= 1000 then ms, us = ms + 1, 0 end
  if us == 0 then return fmt(ms) end
  return fmt(ms) .. '.' .. string.format('%03d', us)
end

-- is_due reports whether s is a due score string as the client sends one:
-- '<ms>' or '<ms>.<us>' with three digits of microseconds.
local function is_due(s)
  return string.match(s, '^%d+$') ~= nil or string.match(s, '^%d+%.%d%d%d$') ~= nil
end

-- ms_of is the whole millisecond of a due score string, floored.
local function ms_of(due)
  return string.match(due, '^%d+')
end

-- resolve_due turns a due argument into a due score string. The argument
-- is an absolute due score ('<ms>' or '<ms>.<us>'), 'now' for the server's
-- clock, or '+<ms>.<us>' (us 0-999) for that long after the server's
-- clock. A relative due time is TIME's microseconds plus the delay, exact
-- to the microsecond, so it is never early; the parts are added separately
-- so that each stays an exact integer in a double.
-- Every relative due time of one call counts from the same TIME, read once.
local relative_base
local function resolve_due(arg)
  -- Absolute due times, the common case, pay one byte comparison.
  if string.byte(arg, 1) ~= 43 then -- not '+'
    if arg == 'now' then return fmt(now_ms()) end
    return arg
  end
  local ms, us = string.match(arg, '^%+(%d+)%.(%d%d%d)$')
  if not ms then return arg end
  relative_base = relative_base or redis.call('TIME')
  local t = relative_base
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  local sub = usec % 1000 + tonumber(us)
  local whole = sec * 1000 + math.floor(usec / 1000) + tonumber(ms) + math.floor(sub / 1000)
  if sub % 1000 == 0 then return fmt(whole) end
  return fmt(whole) .. '.' .. string.format('%03d', sub % 1000)
end

-- over_quota refuses a call that would take a count of held past quota
-- (queue.Quotas; the caller skips the check for 0, unlimited) by adding
-- more: the error 'TIMERQ_QUOTA <name> <quota> <held> <adding>', which
-- the client turns into a queue.QuotaError. A script calls it before its
-- first write, so that the refused call writes nothing.
local function over_quota(name, quota, held, adding)
  if held + adding > quota then
    return redis.error_reply('TIMERQ_QUOTA ' .. name .. ' ' .. fmt(quota) .. ' ' .. fmt(held) .. ' ' .. fmt(adding))
  end
  return nil
end

-- check_types returns an error reply when a key holds a foreign type. It runs
-- before any write because a script that fails half way does not roll back.
local function check_type(key, want)
  local got = redis.call('TYPE', key)
  if type(got) == 'table' then got = got['ok'] end
  if got ~= 'none' and got ~= want then
    return redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. got ..
      ' where timerq keeps a ' .. want)
  end
  return nil
end

local function check_types()
  for i, want in ipairs(KEY_TYPES) do
    local err = check_type(KEYS[i], want)
    if err then return err end
  end
  return nil
end

-- check_hash checks an optional hash key and reports whether it exists,
-- with one TYPE. It returns exists, err.
local function check_hash(key)
  local got = redis.call('TYPE', key)
  if type(got) == 'table' then got = got['ok'] end
  if got == 'none' then return false, nil end
  if got ~= 'hash' then
    return false, redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. got ..
      ' where timerq keeps a hash')
  end
  return true, nil
end

-- check_traces checks KEYS[8], the traces hash, and reports whether it
-- exists, so that a script reads it only when some timer was traced: with
-- tracing off the hash never exists, and it costs one TYPE per call.
-- It returns exists, err.
local function check_traces() return check_hash(KEYS[8]) end

-- take_values reads what an optional hash (the traces, the deliveries)
-- holds for the IDs of the timers about to fire (e[1] of each event) into
-- e[slot], and returns the IDs it found, which the fire then deletes from
-- the hash; or nil and an error reply. The hash is read only when it
-- exists, so a namespace that never traced or delivered pays one TYPE.
local function take_values(key, events, slot)
  local found = {}
  if #events == 0 then return found, nil end
  local exists, err = check_hash(key)
  if err then return nil, err end
  if not exists then return found, nil end
  local ids = {}
  for i, e in ipairs(events) do ids[i] = e[1] end
  local values = redis.call('HMGET', key, unpack(ids))
  for i, e in ipairs(events) do
    if values[i] then
      e[slot] = values[i]
      found[#found + 1] = e[1]
    end
  end
  return found, nil
end

-- ns_prefix is the namespace's key prefix, 'timerq:{NS}:', for the ACL
-- rules that refusal suggests: the hash tag of KEYS[1], whichever key of
-- the namespace that is.
local function ns_prefix()
  -- A shard of a sharded namespace, timerq:{NS:k}:, suggests the pattern
  -- of every shard, timerq:{NS:*}: (docs/operations.md, "ACL rules").
  local p = string.match(KEYS[1], '^(.-}:)') or KEYS[1]
  return (string.gsub(p, ':%d+}:$', ':*}:'))
end

-- acl_refused reports whether err, the error of a command run in a script,
-- is an ACL refusal. Redis 7.0 words it "The user executing the script
-- can't ..."; Valkey 8 "ACL failure in script: ..."; both name neither the
-- key nor the channel. Not just "can't": READONLY says "You can't write
-- against a read only replica".
local function acl_refused(err)
  return string.find(err, 'The user executing the script', 1, true) ~= nil or
    string.find(err, 'ACL failure in script', 1, true) ~= nil or string.sub(err, 1, 7) == 'NOPERM '
end

-- acl_kind says what an ACL refusal err refused: 'command', 'channel' or
-- 'key'. The command wording comes first: Valkey's names the user ("User
-- U has no permissions to run the 'x' command"), whose name may contain
-- "key" or "channel".
local function acl_kind(err)
  if string.find(err, "permissions to run the '", 1, true) or string.find(err, "can't run this command", 1, true) then
    return 'command'
  elseif string.find(err, 'channel', 1, true) then
    return 'channel'
  elseif string.find(err, 'key', 1, true) then
    return 'key'
  end
  return 'command'
end

-- refusal turns the error of a command Redis refused into the script's
-- error reply. An ACL refusal (acl_refused) becomes a NOPERM reply naming
-- the missing right and the rule that grants it; any other refusal (OOM,
-- READONLY, MISCONF) keeps Redis's own code. access is 'read' or, by
-- default, 'write': what cmd does to the key target.
local function refusal(err, cmd, target, access)
  if not acl_refused(err) then
    return redis.error_reply(err)
  end
  local what, rule
  local kind = acl_kind(err)
  if kind == 'channel' then
    what, rule = 'publish to the channel ' .. target, '&' .. ns_prefix() .. '*'
  elseif kind == 'key' then
    what, rule = (access or 'write') .. ' the key ' .. target, '~' .. ns_prefix() .. '*'
  else
    what, rule = 'run ' .. cmd, '+' .. string.lower(cmd)
  end
  return redis.error_reply('NOPERM timerq: the Redis user may not ' .. what ..
    ' (' .. cmd .. ' in a timerq script); grant it with the ACL rule ' .. rule ..
    ' (Redis said: ' .. string.gsub(err, '^ERR ', '') .. ')')
end

-- Probes are forms of each write command that change nothing. Some succeed
-- as no-ops; the others fail in execution, after Redis checked the rights
-- and the memory, before touching the key, with an error containing the
-- text probe_run returns second. The empty string is never a timer ID (the
-- client rejects it), so it is never a member or field that timerq wrote.
-- probe_run is a chain of calls rather than a table of forms: a script
-- runs its whole body on every call, prelude included, and building a
-- dozen tables each time cost more than most of the commands a claim runs.
local function probe_run(cmd, key)
  if cmd == 'ZADD' then
    return redis.pcall(cmd, key, 'XX', 'GT', '-inf', '') -- XX never adds; GT never lowers to -inf
  elseif cmd == 'HSET' then
    return redis.pcall(cmd, key, '', '', ''), 'wrong number of arguments'
  elseif cmd == 'XADD' then
    -- (not 'XADD key 0-0 ...': miniredis creates the stream before failing)
    return redis.pcall(cmd, key, 'MAXLEN', '-1', '*', '', ''), 'MAXLEN'
  elseif cmd == 'HINCRBY' then
    return redis.pcall(cmd, key, '', 'x'), 'not an integer'
  elseif cmd == 'ZREMRANGEBYRANK' or cmd == 'ZREMRANGEBYSCORE' then
    return redis.pcall(cmd, key, '1', '0') -- an empty range
  elseif cmd == 'ZREM' or cmd == 'HDEL' then
    return redis.pcall(cmd, key, '')
  elseif cmd == 'XTRIM' then
    return redis.pcall(cmd, key, 'MINID', '0') -- no entry is below 0-0
  elseif cmd == 'XDEL' then
    return redis.pcall(cmd, key, '0-0') -- no entry has the ID 0-0
  elseif cmd == 'XACK' then
    return redis.pcall(cmd, key, '', '0-0') -- no group is named ''
  elseif cmd == 'SET' then
    return redis.pcall(cmd, key, '', 'PX', '0'), 'invalid expire time'
  end
  return {err = 'ERR timerq: no probe for ' .. cmd}
end

-- probe runs the no-op form of cmd on key and returns an error reply if
-- Redis refused it, else nil. Any unexpected outcome counts as a refusal:
-- stopping before the first write is always safe.
local function probe(cmd, key)
  local r, want = probe_run(cmd, key)
  local err = type(r) == 'table' and r.err
  if want then
    if err and string.find(err, want, 1, true) then return nil end
    return refusal(err or ('ERR timerq: the ' .. cmd .. ' probe unexpectedly succeeded'), cmd, key)
  end
  if err then return refusal(err, cmd, key) end
  return nil
end

-- probe_all probes each {cmd, key} pair in order, and returns the first
-- refusal's error reply, or nil.
local function probe_all(list)
  for _, w in ipairs(list) do
    local err = probe(w[1], w[2])
    if err then return err end
  end
  return nil
end

-- read_probe runs a read command that the script runs again after its
-- first write, so that Redis applies its ACL refusal before any write; it
-- returns the command's reply, or nil and the refusal's error reply.
local function read_probe(cmd, key, ...)
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then return nil, refusal(r.err, cmd, key, 'read') end
  return r, nil
end

-- publish sends one message, and returns an error reply if Redis refused it.
local function publish(channel, msg)
  local r = redis.pcall('PUBLISH', channel, msg)
  if type(r) == 'table' and r.err then return refusal(r.err, 'PUBLISH', channel) end
  return nil
end

-- Wake if earlier: a script that adds timers to the due set (KEYS[1])
-- tells the shard's pollers, on the wake channel, the new earliest due time
-- when it moves earlier, so that a poller sleeping until the old one wakes.
-- wake_start reads the earliest due time before any change; wake_consider
-- is called with each due time the script adds; wake_publish sends the
-- message, if the earliest moved, in phase 3 before the writes, and returns
-- an error reply if Redis refused it.
local wake_at, wake_moved
local function wake_start()
  local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  wake_at, wake_moved = tonumber(head[2]), false
end

local function wake_consider(due)
  local d = tonumber(due)
  if wake_at == nil or d < wake_at then
    wake_at, wake_moved = d, true
  end
end

local function wake_publish(channel)
  if not wake_moved then return nil end
  return publish(channel, fmt_due(wake_at))
end

-- A record is "<state>:<due_ms>:<created_ms>:<settled_ms>:<payload>", state
-- being s (scheduled), f (fired) or c (cancelled). While scheduled, due_ms
-- and settled_ms are empty: the due time lives only in the due set, which
-- saves 16 bytes per pending timer and lets reschedule touch one key. The
-- payload goes last so it may hold any bytes.
local function encode(state, due, created, settled, payload)
  return state .. ':' .. due .. ':' .. created .. ':' .. settled .. ':' .. payload
end

-- Cancel a timer: cancel_probes adds to probes the writes of cancel_timer,
-- ZADD on the cancelled set first (so that Redis refuses a cancel under
-- OOM); cancel_publish tells the timer's waiters, in phase 3 before the
-- writes; cancel_timer rewrites the scheduled timer id (due due_ms) as
-- cancelled at now_ms, moves it from the due set to the cancelled set and,
-- when retention_ms > 0, into the expire set, and returns its new record.
local function cancel_probes(probes, retention)
  probes[#probes + 1] = {'ZADD', KEYS[4]}
  probes[#probes + 1] = {'HSET', KEYS[2]}
  probes[#probes + 1] = {'ZREM', KEYS[1]}
  if retention > 0 then probes[#probes + 1] = {'ZADD', KEYS[5]} end
  return probes
end

local function cancel_publish(channel)
  return publish(channel, 'cancelled')
end

local function cancel_timer(id, due, created, payload, now, retention)
  due = ms_of(due) -- a settled record keeps whole ms
  local rec = encode('c', due, created, fmt(now), payload)
  redis.call('HSET', KEYS[2], id, rec)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[4], due, id)
  if retention > 0 then
    redis.call('ZADD', KEYS[5], fmt(now + retention), id)
  end
  return rec
end

-- MAX_MS is 9999-12-31T23:59:59.999Z, the latest time timerq stores
-- (queue.ValidateDue); exact in a double.
local MAX_MS = 253402300799999

-- is_ms reports whether a record's time field is one timerq writes: 1 to
-- 15 ASCII digits (the caller's pattern matched %d) of at most MAX_MS.
local function is_ms(s)
  return #s >= 1 and #s <= 15 and tonumber(s) <= MAX_MS
end

-- decode splits a record, or returns nil when it is malformed: not
-- exactly what encode writes for some state and times in 0..MAX_MS. It is
-- the one validity rule; queue's decodeStored (timer.go) is its mirror,
-- and FuzzQuarantineMatchesDecoder holds the two to the same answer.
local function decode(rec)
  -- A scheduled record, the one a claim reads for every timer it fires,
  -- by a shorter pattern: the general one below, with state s and due and
  -- settled empty.
  local c, p = string.match(rec, '^s::(%d+)::()')
  if c then
    if not is_ms(c) then return nil end
    return 's', '', c, '', string.sub(rec, p)
  end
  local state, due, created, settled, at = string.match(rec, '^([sfc]):(%d*):(%d+):(%d*):()')
  if not state or not is_ms(created) then return nil end
  if state == 's' then
    if due ~= '' or settled ~= '' then return nil end
  elseif not is_ms(due) or not is_ms(settled) then
    return nil
  end
  return state, due, created, settled, string.sub(rec, at)
end

-- score_ms turns a due set score into a due score string ('<ms>' or
-- '<ms>.<us>', fmt_due), or nil when it is not a number from 0 to before
-- MAX_MS + 1 (only a hand-written ZADD gives one).
local function score_ms(score)
  local d = tonumber(score)
  if not d or d < 0 or d >= MAX_MS + 1 then return nil end
  -- Redis writes a whole score below 1e17 as its digits: keep them rather
  -- than format them again (a claim does this for every timer).
  if type(score) == 'string' and string.find(score, '^%d+$') then return score end
  return fmt_due(d)
end

-- malformed is the error reply for a record that decode rejects, or for a
-- scheduled timer without a due time; it names the timer and the way out.
local function malformed(id, why)
  id = string.gsub(id, '%c', '?')
  return redis.error_reply('TIMERQ_MALFORMED timer "' .. id .. '" in ' .. KEYS[2] .. ' ' .. why ..
    ', so timerq changed nothing; something other than timerq wrote it: inspect it (HGET ' .. KEYS[2] ..
    ' and ZSCORE ' .. KEYS[1] .. '), then remove it (HDEL and ZREM) or reschedule it')
end

-- due_of returns a scheduled timer's due score string (score_ms), or nil when
-- it has none (a scheduled record left half-written by an older timerq,
-- whose scripts wrote before they published) or a score that is no due
-- time (score_ms).
local function due_of(id)
  local score = redis.call('ZSCORE', KEYS[1], id)
  if not score then return nil end
  return score_ms(score)
end

-- full fills in the due time of a scheduled record for a reply. A scheduled
-- record without a due time is returned as it is, which the client reports
-- as malformed.
local function full(id, rec)
  if string.sub(rec, 1, 3) ~= 's::' then return rec end
  local due = due_of(id)
  if not due then return rec end
  return 's:' .. due .. string.sub(rec, 3)
end

-- full_or_bad is full for a record that decode accepts and whose due time
-- (if scheduled) is valid; for any other it returns nil and why, so that a
-- reader skips and reports the record instead of failing.
local function full_or_bad(id, rec)
  local state = decode(rec)
  if not state then return nil, 'malformed record' end
  if state == 's' then
    local due = due_of(id)
    if not due then return nil, 'scheduled record without a valid due time' end
    return 's:' .. due .. string.sub(rec, 3)
  end
  return rec
end

-- A schedule record (the schedules hash, recur_prelude.lua) is
-- "<version>:<state>:<count>:<last_ms>:<armed>:<overlap>:<body>": version
-- counts puts, updates, pauses and resumes (the arm script refuses a plan
-- made from another version); state is a (active), p (paused) or e (ended:
-- nothing more to arm); count is how many occurrences were armed and not
-- cancelled (fired plus pending), for a maximum count; last_ms is the
-- nominal time of the last occurrence armed or skipped, from which Go
-- computes the next; armed is a comma list of the nominal ms of occurrences
-- armed and maybe still pending; overlap is the overlap policy, allow or
-- skip, which overlap.lua reads; body is JSON from Go that no script reads.
--
-- A record written before the overlap field has the body right after
-- armed, a JSON object ('{', never a letter); its policy is in the body,
-- "overlap":"skip" (encoding/json escapes a quote inside a string value,
-- so that text can only be the field itself). sdecode reads both forms,
-- and every write of a record (sencode) writes the field, so an old record
-- gains it at its next arm or change.
local function sdecode(rec)
  local v, st, cnt, last, armed, at = string.match(rec, '^(%d+):(%a):(%d+):(%d*):([%d,]*):()')
  if not v then return nil end
  local overlap, body_at = string.match(rec, '^(%a+):()', at)
  if not overlap then
    body_at = at
    overlap = string.find(rec, '"overlap":"skip"', at, true) and 'skip' or 'allow'
  end
  return tonumber(v), st, tonumber(cnt), last, armed, overlap, string.sub(rec, body_at)
end

local function sencode(v, st, cnt, last, armed, overlap, body)
  return fmt(v) .. ':' .. st .. ':' .. fmt(cnt) .. ':' .. last .. ':' .. armed .. ':' .. overlap .. ':' .. body
end

-- quarantine_value is what the quarantine hash keeps for a record moved
-- aside: "<quarantined_at_ms>:<due score>:<reason>:<raw record>". The
-- score is as Redis gave it (never holding ':'), the reason one of claim's
-- fixed phrases (no ':' either), and the raw record last, byte for byte.
local function quarantine_value(now_s, score, reason, rec)
  return now_s .. ':' .. score .. ':' .. reason .. ':' .. rec
end
