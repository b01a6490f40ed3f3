-- get.lua: one timer's record, its due time filled in.
--
-- KEYS: the namespace's seven keys (see includes/check_types.lua).
-- ARGV[1] id
-- Reply: the record, or false (nil) when there is none; a TIMERQ_MALFORMED
--        error for a record that is not one timerq writes (full_or_bad).
-- Complexity: O(log N).

local err = check_types()
if err then return err end

local rec = redis.call('HGET', KEYS[2], ARGV[1])
if not rec then return false end
local full_rec, why = full_or_bad(ARGV[1], rec)
if not full_rec then return malformed(ARGV[1], 'has a ' .. why) end
return full_rec
