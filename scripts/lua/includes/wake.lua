-- wake (include): tell the shard's pollers of an earlier due time (reads
-- KEYS[1]).
-- includes: fmt_due pending_end publish
--
-- Wake if earlier: a script that adds timers to the due set (KEYS[1])
-- tells the shard's pollers, on the wake channel, the new earliest due time
-- when it moves earlier, so that a poller sleeping until the old one wakes.
-- wake_start reads the earliest due time before any change; wake_consider
-- is called with each due time the script adds; wake_publish sends the
-- message, if the earliest moved, in phase 3 before the writes, and returns
-- an error reply if Redis refused it. wake_start, which every script
-- using the others calls first, resets wake_at and wake_moved, which as a
-- Redis function outlive the call.
local wake_at, wake_moved
local function wake_start()
  local head = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', PENDING_END, 'WITHSCORES', 'LIMIT', 0, 1)
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
