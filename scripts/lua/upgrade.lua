-- upgrade.lua: move one shard from layout 1 to layout 2, a step at a time
-- (queue.UpgradeLayout; docs/redis-layout.md, "Layout 2").
--
-- KEYS[1] due (layout 1's due set; layout 2's marker), KEYS[2] sched,
--         KEYS[3] timers, KEYS[4] fired, KEYS[5] cancelled, KEYS[6] expire
-- ARGV[1] limit: most settled timers to move in this call (1..1000)
-- ARGV[2] the marker (keyspace.LayoutMarker(2))
-- Reply: {cut, left}: cut is 1 when this call made the cutover, left the
--        settled timers still in the layout-1 sets; call again while it is
--        above 0. Idempotent: a call on a drained shard changes nothing.
-- Complexity: O(1) for the cutover, O(k log N) for k settled timers moved.
--
-- The cutover is one atomic step: RENAME due sched, which moves every
-- scheduled timer at once (their scores are already right), and the
-- marker in due, which every layout-1 script reads first and refuses
-- with TIMERQ_LAYOUT before it writes. From then on a timer is in exactly
-- one layout: layout-1 claims stop at the marker, layout-2 claims start
-- at sched. The records stay in timers, in the same form.
-- The drain then moves the settled timers, fired and cancelled, from their
-- sets into their bands of sched at the settle time their record keeps
-- (includes/layout.lua); layout 2 applies the retention at purge time, so
-- expire goes. A member without a record was purged already and only
-- leaves its set; one whose record is malformed keeps it and settles now,
-- so that purge removes it after the retention. The drain empties fired
-- and cancelled, and deletes expire once they are empty. Only due keeps a
-- marker: every layout-1 script that writes checks it first. While the
-- drain runs, layout-2 List and Stats do not yet
-- see the settled timers left in the old sets; Get, Cancel and Schedule
-- read the record and see every timer.

-- layout2 reports whether key, which holds a string, holds layout 2's
-- marker, or returns the error reply of a refused GET.
local function layout2(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then return false, refusal(v.err, 'GET', key, 'read') end
  return string.find(v, '^timerq%-layout 2') ~= nil, nil
end

local function typed(key, want)
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then t = t['ok'] end
  if t ~= 'none' and t ~= want then return t end
  return nil
end

-- Phase 1: checks.
local due_type = typed(KEYS[1], 'zset')
local cut = 0
if due_type == nil then
  cut = 1
  if redis.call('EXISTS', KEYS[2]) == 1 then
    local t = redis.call('TYPE', KEYS[2])
    if type(t) == 'table' then t = t['ok'] end
    return layout_marker(KEYS[2], t) or redis.error_reply('WRONGTYPE key ' .. KEYS[2] ..
      ' exists beside the layout-1 set ' .. KEYS[1] .. ': another program writes there; the shard was not changed')
  end
else
  -- Layout 2's marker: cut over already. A later layout's stops this
  -- build (layout_marker).
  local is2, gerr = false, nil
  if due_type == 'string' then is2, gerr = layout2(KEYS[1]) end
  if gerr then return gerr end
  if not is2 then
    return layout_marker(KEYS[1], due_type) or redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' ..
      due_type .. ' that is neither the due set nor the layout-2 marker; the shard was not changed')
  end
end
for i, want in ipairs({'zset', 'hash', 'zset', 'zset', 'zset'}) do
  local got = typed(KEYS[i + 1], want)
  if got then
    return layout_marker(KEYS[i + 1], got) or
      redis.error_reply('WRONGTYPE key ' .. KEYS[i + 1] .. ' holds a ' .. got .. ' where timerq keeps a ' .. want)
  end
end

local limit = tonumber(ARGV[1])
local now = now_ms()
local moves, drop, left = {}, {}, 0
for _, set in ipairs({{KEYS[4], 'f'}, {KEYS[5], 'c'}}) do
  local key, state = set[1], set[2]
  do
    local ids = {}
    if limit > 0 then ids = redis.call('ZRANGE', key, 0, limit - 1) end
    if #ids > 0 then
      local recs = redis.call('HMGET', KEYS[3], unpack(ids))
      for i, id in ipairs(ids) do
        if recs[i] then
          local st, _, _, settled = decode(recs[i])
          if st ~= state then settled = fmt(now) end
          moves[#moves + 1] = fmt((state == 'f' and BAND_FIRED or BAND_CANCELLED) + tonumber(settled))
          moves[#moves + 1] = id
        end
      end
      drop[#drop + 1] = {key, ids}
      limit = limit - #ids
    end
    left = left + redis.call('ZCARD', key) - #ids
  end
end

-- Phase 2: probes. SET first: Redis refuses it under OOM, so a full
-- Redis upgrades nothing rather than half.
local err = (cut == 1 and probe('SET', KEYS[1])) or (left == 0 and probe('ZREMRANGEBYRANK', KEYS[6])) or
  (#moves > 0 and probe('ZADD', KEYS[2])) or (#drop > 0 and probe('ZREM', KEYS[4])) or
  (#drop > 0 and probe('ZREM', KEYS[5])) or nil
if err then return err end
if cut == 1 and redis.call('EXISTS', KEYS[1]) == 1 then
  -- RENAME of a key to itself changes nothing, after the ACL check.
  local r = redis.pcall('RENAME', KEYS[1], KEYS[1])
  if type(r) == 'table' and r.err then return refusal(r.err, 'RENAME', KEYS[1]) end
end

-- Phase 3: write.
if cut == 1 then
  if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('RENAME', KEYS[1], KEYS[2]) end
  redis.call('SET', KEYS[1], ARGV[2])
end
if #moves > 0 then redis.call('ZADD', KEYS[2], unpack(moves)) end
for _, d in ipairs(drop) do redis.call('ZREM', d[1], unpack(d[2])) end
if left == 0 then redis.call('ZREMRANGEBYRANK', KEYS[6], 0, -1) end
return {cut, left}
