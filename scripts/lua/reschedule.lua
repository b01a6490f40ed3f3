-- reschedule.lua: move a scheduled timer to a new due time.
--
-- KEYS: the namespace's seven keys (see includes/check_types.lua).
-- ARGV[1] id
-- ARGV[2] new due score ('<ms>' or '<ms>.<us>'), 'now' for the server's current time (fire at once), or
--         '+<ms>.<us>' for that long after it (see includes/resolve_due.lua)
-- ARGV[3] wake channel, told the new earliest due_ms when it moves earlier
-- Reply: {status, record}: status 'ok', 'fired', 'cancelled' or 'notfound';
--        the record is the updated one on 'ok', the current one otherwise.
-- Complexity: O(log N); the record is not rewritten.

local err = check_types()
if err then return err end

-- Phase 1: read and check.
local id = ARGV[1]
local rec = redis.call('HGET', KEYS[2], id)
if not rec then return {'notfound', ''} end
local state = decode(rec)
if not state then return malformed(id, 'has a malformed record') end
if state == 'f' then return {'fired', rec} end
if state == 'c' then return {'cancelled', rec} end

local due = ARGV[2]
due = resolve_due(due)
if not is_due(due) then
  return redis.error_reply('ERR timerq: due time "' .. due .. '" is not a due time in milliseconds')
end
wake_start()
wake_consider(due)

-- Phase 2: probe the one write; ZADD, so Redis refuses it under OOM.
err = probe('ZADD', KEYS[1])
if err then return err end

-- Phase 3: publish, then write. The record does not hold a scheduled
-- timer's due time: the set is enough (this also mends a scheduled record
-- that an older timerq left without a due time). The reply is built here,
-- not read back: nothing runs after the write.
err = wake_publish(ARGV[3])
if err then return err end
redis.call('ZADD', KEYS[1], due, id)
return {'ok', 's:' .. due .. string.sub(rec, 3)}
