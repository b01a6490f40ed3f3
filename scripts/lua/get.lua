-- get.lua: one timer's record, its due time filled in.
--
-- KEYS: the namespace's seven keys (see includes/check_types.lua), then
--       KEYS[8] the shard's timer meta hash (keyspace TimerMeta)
-- ARGV[1] id
-- Reply: the record, or {record, meta} for a timer with an owner, labels
--        or a deadline (keyspace TimerMeta), or false (nil) when there is
--        none; a TIMERQ_MALFORMED
--        error for a record that is not one timerq writes (full_or_bad).
-- Complexity: O(log N).

local err = check_types() or check_type(KEYS[8], 'hash')
if err then return err end

local rec = redis.call('HGET', KEYS[2], ARGV[1])
if not rec then return false end
local full_rec, why = full_or_bad(ARGV[1], rec)
if not full_rec then return malformed(ARGV[1], 'has a ' .. why) end
local meta = redis.call('HGET', KEYS[8], ARGV[1])
if meta then return {full_rec, meta} end
return full_rec
