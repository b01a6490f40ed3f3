-- overlap.lua: apply the schedules' overlap policies to fire events that
-- Consume is about to hand to one consumer group, atomically with the
-- group's pending entries. Consume runs it once per batch of deliveries
-- that holds occurrences (IDs "<schedule>@<ms>"); plain timers never pay it.
--
-- KEYS[1] fires     STREAM the shard's fire stream, which the group reads
-- KEYS[2] schedules HASH   schedule id -> record, whose overlap field
--                   (includes/sdecode.lua) is the policy; no record
--                   allows overlap
-- KEYS[3] overlap   HASH   the group's schedule id -> stream entry ID of the
--                   occurrence last handed to the group
-- KEYS[4] counters  HASH   the shard's counters (includes/check_types.lua): overlap_skipped
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
-- It runs in the three phases of includes/probe.lua: reads and checks; no-op probes of
-- every write; writes. XACK goes first: it does not grow memory, so under
-- OOM skips still acknowledge.

local types = {'stream', 'hash', 'hash', 'hash'}
for i, want in ipairs(types) do
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
    local overlap = rec and select(6, sdecode(rec))
    skip_of[sid] = overlap == 'skip'
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

-- Phase 2: probes of every write (includes/probe.lua); XACK first.
local probes = {}
if #acks > 0 then
  probes[#probes + 1] = {'XACK', KEYS[1]}
  probes[#probes + 1] = {'HINCRBY', KEYS[4]}
end
if next(sets) then probes[#probes + 1] = {'HSET', KEYS[3]} end
if next(dels) then probes[#probes + 1] = {'HDEL', KEYS[3]} end
local err = probe_all(probes)
if err then return err end

-- Phase 3: writes.
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
