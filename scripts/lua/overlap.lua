-- overlap.lua: apply the schedules' overlap policies to fire events that
-- Consume is about to hand to one consumer group, atomically with the
-- group's pending entries. Consume runs it once per batch of deliveries
-- that holds occurrences (IDs "<schedule>@<ms>"); plain timers never pay it.
--
-- KEYS[1] fires     STREAM the shard's fire stream, which the group reads
-- KEYS[2] schedules HASH   schedule id -> record (recur_prelude.lua); a
--                   record whose JSON body holds "overlap":"skip" has the
--                   skip policy, any other (or none) allows overlap
-- KEYS[3] overlap   HASH   the group's schedule id -> stream entry ID of the
--                   occurrence last handed to the group
-- KEYS[4] counters  HASH   the shard's counters (prelude.lua): overlap_skipped
-- ARGV[1] group
-- ARGV[2..] pairs: stream entry ID, schedule ID, in delivery order
-- Reply: one verdict per pair: '' to hand it to the handler, or the stream
--        entry ID of the schedule's pending occurrence because of which it
--        was skipped: acknowledged here, never handed over.
-- Complexity: O(k log P) for k pairs and P entries pending in the group:
--        per pair two HGETs and, under skip, one XPENDING of one entry.
--
-- Under skip, an occurrence is handed over unless another occurrence of its
-- schedule, the one the overlap hash names, is still pending in the group
-- (delivered, not acknowledged: its handler runs, failed and awaits a
-- retry, or its consumer died and it awaits a reclaim). The pending entry
-- list is the truth; the hash only says which entry to ask it about, so an
-- acknowledgement needs no extra write, and a redelivery of the named entry
-- itself is handed over. Fields of schedules that were deleted or allow
-- overlap again are removed when one of their occurrences passes.
--
-- Standalone (no prelude), like heartbeat.lua, and in the same three
-- phases: reads and checks; no-op probes of every write; writes. XACK goes
-- first: it does not grow memory, so under OOM skips still acknowledge.

local function check_type(key, want)
  local got = redis.call('TYPE', key)
  if type(got) == 'table' then got = got['ok'] end
  if got ~= 'none' and got ~= want then
    return redis.error_reply('WRONGTYPE key ' .. key .. ' holds a ' .. got ..
      ' where timerq keeps a ' .. want)
  end
  return nil
end

for i, want in ipairs({'stream', 'hash', 'hash', 'hash'}) do
  local err = check_type(KEYS[i], want)
  if err then return err end
end

local group = ARGV[1]
local skip_of = {}   -- schedule id -> true under skip
local current = {}   -- schedule id -> entry ID last handed over, or false
local sets, dels, acks = {}, {}, {}
local reply = {}

local function pending(eid)
  local r = redis.call('XPENDING', KEYS[1], group, eid, eid, 1)
  return #r > 0
end

for i = 2, #ARGV, 2 do
  local eid, sid = ARGV[i], ARGV[i + 1]
  if skip_of[sid] == nil then
    local rec = redis.call('HGET', KEYS[2], sid)
    -- The body is JSON from encoding/json: a quote inside a string value
    -- is escaped, so this text can only be the overlap field itself.
    skip_of[sid] = rec and string.find(rec, '"overlap":"skip"', 1, true) ~= nil or false
    current[sid] = redis.call('HGET', KEYS[3], sid)
  end
  local verdict = ''
  if not skip_of[sid] then
    if current[sid] then dels[sid] = true end
  else
    local prev = current[sid]
    if prev and prev ~= eid and pending(prev) then
      verdict = prev
      acks[#acks + 1] = eid
    else
      current[sid] = eid
      sets[sid] = eid
    end
  end
  reply[#reply + 1] = verdict
end

-- Probes: each write on its key in a form that changes nothing. A refusal
-- is answered as prelude.lua's refusal does: an ACL refusal names the
-- right and the rule that grants it, any other keeps Redis's code.
local function refused(r, want, cmd, key)
  local err = type(r) == 'table' and r.err
  if want and err and string.find(err, want, 1, true) then return nil end
  if not err then
    if not want then return nil end
    err = 'ERR timerq: the ' .. cmd .. ' probe unexpectedly succeeded'
  end
  -- An ACL refusal: Redis 7.0 says "The user executing the script can't
  -- ...", Valkey 8 "ACL failure in script: ..." (see prelude.lua).
  if not string.find(err, 'The user executing the script', 1, true) and
    not string.find(err, 'ACL failure in script', 1, true) and string.sub(err, 1, 7) ~= 'NOPERM ' then
    return redis.error_reply(err)
  end
  -- timerq:{NS}:fires or timerq:{NS:k}:fires -> the namespace's pattern.
  local prefix = string.gsub(string.sub(KEYS[1], 1, -6), ':%d+}:$', ':*}:')
  local what, rule = 'run ' .. cmd, '+' .. string.lower(cmd)
  -- Valkey names the user in a command refusal, and a user name may
  -- contain "key": only a refusal that names no command is a key's.
  if string.find(err, 'key', 1, true) and not string.find(err, "permissions to run the '", 1, true) and
    not string.find(err, "can't run this command", 1, true) then
    what, rule = 'write the key ' .. key, '~' .. prefix .. '*'
  end
  return redis.error_reply('NOPERM timerq: the Redis user may not ' .. what ..
    ' (' .. cmd .. ' in the consumer\'s overlap script); grant it with the ACL rule ' .. rule ..
    ' (Redis said: ' .. string.gsub(err, '^ERR ', '') .. ')')
end
local probes = {}
if #acks > 0 then
  probes[#probes + 1] = {redis.pcall('XACK', KEYS[1], group, '0-0'), nil, 'XACK', KEYS[1]}
  probes[#probes + 1] = {redis.pcall('HINCRBY', KEYS[4], '', 'x'), 'not an integer', 'HINCRBY', KEYS[4]}
end
if next(sets) then
  probes[#probes + 1] = {redis.pcall('HSET', KEYS[3], '', '', ''), 'wrong number of arguments', 'HSET', KEYS[3]}
end
if next(dels) then
  probes[#probes + 1] = {redis.pcall('HDEL', KEYS[3], ''), nil, 'HDEL', KEYS[3]}
end
for _, p in ipairs(probes) do
  local err = refused(p[1], p[2], p[3], p[4])
  if err then return err end
end

if #acks > 0 then
  redis.call('XACK', KEYS[1], group, unpack(acks))
  redis.call('HINCRBY', KEYS[4], 'overlap_skipped', #acks)
end
for sid, eid in pairs(sets) do
  redis.call('HSET', KEYS[3], sid, eid)
end
for sid in pairs(dels) do
  redis.call('HDEL', KEYS[3], sid)
end
return reply
