-- deadline (include): a fire's delivery deadline, for lease.lua and
-- release.lua.
-- includes: acl_probe check_type fmt
--
-- A timer's deadline (NewTimer.FireWithin, FireBy) is the second field of
-- its meta, '<epoch>\31<deadline ms or empty>\31<owner>...' (queue/owner.go),
-- which claim.lua and commit.lua copy into its fire entry as the field
-- meta; a fire without meta has no deadline. A delivery that would begin
-- after the deadline, by the server's clock, is dead-lettered with the
-- reason deadline instead (queue.ReasonDeadline), and counted in the
-- shard's counters as dead_deadline.

-- deadline_ms is the deadline (ms, a number) of a meta value, or nil for
-- none (or a meta that is not timerq's, which the client dead-letters as
-- malformed when it reads the entry).
local function deadline_ms(meta)
  local ms = string.match(meta, '^[^\31]*\31(%d+)\31')
  return ms and tonumber(ms)
end

-- deadline_keys checks what lease.lua's dead letters write but the XADD's
-- right, whose probe runs on every call: the types of the dead-letter
-- stream (KEYS[8]) and of the counters (KEYS[7]), and the rights to count
-- (includes/counters.lua). It returns an error reply or nil. An include,
-- so that a Redis function defines it once, not on every call.
local function deadline_keys()
  return check_type(KEYS[8], 'stream') or check_type(KEYS[7], 'hash') or acl_probe('HINCRBY', KEYS[7]) or
    acl_probe('HSET', KEYS[7])
end

-- deadline_cause is the error of a dead letter its deadline ruled out: the
-- reason first, as the dispatcher writes its reasons; what says which
-- delivery would have been late and at is when it would have begun, by
-- the server's clock (ms). queue.deadlineCause writes the same.
local function deadline_cause(deadline, what, at)
  return 'deadline: ' .. what .. ' at ' .. fmt(at) .. ' ms by the server clock, past the fire deadline ' ..
    fmt(deadline) .. ' ms (NewTimer.FireWithin or FireBy): dead-lettered, never delivered late'
end
