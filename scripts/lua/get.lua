-- get.lua: one timer's record, its due time filled in.
--
-- KEYS: the namespace's seven keys (see prelude.lua).
-- ARGV[1] id
-- Reply: the record, or false (nil) when there is none.
-- Complexity: O(log N).

local err = check_types()
if err then return err end

local rec = redis.call('HGET', KEYS[2], ARGV[1])
if not rec then return false end
return full(ARGV[1], rec)
