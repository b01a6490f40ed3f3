-- counters (include): add to the counters hash (KEYS[7]) with nothing
-- half-done, for the scripts that count (claim.lua, commit.lua, hold.lua;
-- lease.lua and release.lua count the deliveries their deadline ruled out).
-- includes: acl_probe fmt
--
-- A script collects what it adds in a batch of counts (counters_batch,
-- counters_add: field -> increment, or false for a field not counted),
-- checks KEYS[7]'s type in phase 1 (its
-- own TYPE or check_types), probes with counters_probes in phase 2, and
-- writes with counters_write last of all (includes/probe.lua has the
-- phases).
--
-- HINCRBY fails on a field that holds no integer it can add to (only a
-- hand-written HSET makes one), and that failure would come after the
-- script's other writes, leaving its timers fired but the script failed.
-- Reading every field first to look cost a claim about 8% more
-- (callgrind, BENCHMARKS.md); instead counters_write runs each HINCRBY
-- under pcall and, when Redis refuses it, writes the field as the
-- increment (HSET): its count restarts rather than the shard stops
-- firing. By then nothing else can refuse the HSET: the type was checked
-- in phase 1, the ACL's rights in phase 2, and Redis applies OOM and the
-- other server states only to a script's first write.

-- The batch starts with the fields a claim counts, as false, so that its
-- table is made at its size: adding them one by one, with a lateness
-- bucket, grew it three times a call.
local function counters_batch()
  return {fired = false, late_sum_ms = false, quarantined = false}
end

local function counters_add(c, field, n)
  c[field] = (c[field] or 0) + n
end

local function counters_probes(c)
  -- (a claim that fired or quarantined counts those: no pairs loop)
  local any = c.fired or c.quarantined or false
  if not any then
    for _, n in pairs(c) do
      if n then
        any = true
        break
      end
    end
  end
  if not any then return nil end
  return acl_probe('HINCRBY', KEYS[7]) or acl_probe('HSET', KEYS[7])
end

local function counters_write(c)
  for field, n in pairs(c) do
    if n then
      local s = fmt(n)
      local r = redis.pcall('HINCRBY', KEYS[7], field, s)
      if type(r) == 'table' and r.err then redis.call('HSET', KEYS[7], field, s) end
    end
  end
end
