-- cancel_timer (include): cancel a scheduled timer: its probes, its message,
-- its writes (KEYS[1], [2], [4], [5]).
-- includes: encode fmt layout ms_of pending_end publish
--
-- Cancel a timer: cancel_probes adds to probes the writes of cancel_timer,
-- ZADD on the cancelled set first (so that Redis refuses a cancel under
-- OOM); cancel_publish tells the timer's waiters, in phase 3 before the
-- writes; cancel_timer rewrites the scheduled timer id (due due_ms) as
-- cancelled at now_ms, moves it from the due set to the cancelled set and,
-- when retention_ms > 0, into the expire set, and returns its new record.
-- In layout 2 the move is one ZADD: the member goes from its due time to
-- the cancelled band, and purge applies the retention.
local function cancel_probes(probes, retention)
  probes[#probes + 1] = {'ZADD', KEYS[4]}
  probes[#probes + 1] = {'HSET', KEYS[2]}
  if LAYOUT == 2 then return probes end
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
  if LAYOUT == 2 then
    redis.call('ZADD', KEYS[1], fmt(BAND_CANCELLED + now), id)
    return rec
  end
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[4], due, id)
  if retention > 0 then
    redis.call('ZADD', KEYS[5], fmt(now + retention), id)
  end
  return rec
end
