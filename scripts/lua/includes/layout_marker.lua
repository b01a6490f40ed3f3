-- layout_marker (include): refuse a key that a later layout retired.
--
-- A later layout of a shard's keys (docs/redis-layout.md, "Layout
-- versions") retires a key by leaving in its place a string that starts
-- "timerq-layout <n>", n being the layout that retired it. A binary that
-- predates layout n must not write the old key back: the timer it wrote
-- would sit where nobody looks for it. So a type check that finds a
-- string where timerq keeps another type reads it, and a marker refuses
-- the call with TIMERQ_LAYOUT, which the Go side turns into
-- queue.ErrLayout ("upgrade this binary"), instead of WRONGTYPE ("another
-- program writes here", whose fix, deleting the key, would strand timers).
-- This runs only on that error path; a user without GET gets WRONGTYPE.
--
-- layout_marker returns the TIMERQ_LAYOUT error reply for key, which
-- holds a value of type got, or nil when it is no marker.
local function layout_marker(key, got)
  if got ~= 'string' then return nil end
  local v = redis.pcall('GET', key)
  if type(v) ~= 'string' then return nil end
  local n = string.match(v, '^timerq%-layout (%d+)')
  if not n then return nil end
  return redis.error_reply('TIMERQ_LAYOUT ' .. n .. ' ' .. key)
end
