-- schedule.lua: create timers that do not exist yet; leave existing ones alone.
--
-- KEYS: the namespace's six keys (see prelude.lua).
-- ARGV[1]        wake channel, told the new earliest due_ms when it moves earlier
-- ARGV[2+3i..]   triples: id, due, payload (validated by the client); due is
--                due_ms, or '+<ms>.<us>' for that long after the server's
--                clock (see resolve_due in prelude.lua)
-- Reply: {now_ms, created_1, record_1, created_2, record_2, ...}; created is
--        1 for a new timer and 0 when the ID already existed in any state.
-- Complexity: O(k log N) for k timers in a set of N.
--
-- Idempotent by ID: an existing record, even fired or cancelled, is returned
-- unchanged, so a replaying caller never re-arms a timer that already fired.

local err = check_types()
if err then return err end

local now = fmt(now_ms())
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local earliest = tonumber(head[2])
local moved_earlier = false

local reply = {now}
for i = 2, #ARGV, 3 do
  local id, due, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local rec = redis.call('HGET', KEYS[2], id)
  if rec then
    reply[#reply + 1] = 0
    rec = full(id, rec)
  else
    due = resolve_due(due)
    rec = encode('s', '', now, '', payload)
    redis.call('HSET', KEYS[2], id, rec)
    redis.call('ZADD', KEYS[1], due, id)
    local d = tonumber(due)
    if earliest == nil or d < earliest then
      earliest = d
      moved_earlier = true
    end
    reply[#reply + 1] = 1
    rec = encode('s', due, now, '', payload)
  end
  reply[#reply + 1] = rec
end

if moved_earlier then
  redis.call('PUBLISH', ARGV[1], fmt(earliest))
end
return reply
