-- quarantine (include): move due members that cannot fire aside, into the
-- quarantine hash KEYS[9], for claim.lua and hold.lua.
-- includes: check_type counters fmt probe
--
-- A due member whose record is malformed (decode), or whose due score is
-- no due time (score_ms), cannot fire, and failing the claim for it would
-- stop every timer of the shard behind it. quarantine_why says whether a
-- due member with a record is one (its reason, or nil); the caller
-- collects them as {id, score, reason, rec} in a list q, and then
-- quarantine_check checks KEYS[9]'s type and counts them in the caller's
-- counters batch (field quarantined, includes/counters.lua), quarantine_probes
-- probes the writes, quarantine_reply appends q's count and {id, reason}
-- pairs to a reply, and quarantine_write moves each record, byte for byte,
-- from the timers hash (KEYS[2]) to KEYS[9]. Removing them from the due
-- set (KEYS[1]) and writing the counts are the caller's.
--
-- KEYS[9] keeps "<quarantined_at_ms>:<due score>:<reason>:<raw record>":
-- the score as Redis gave it (never holding ':'), the reason one of the
-- fixed phrases below (no ':' either), and the raw record last.

local function quarantine_why(state, due_s)
  if not state then return 'malformed record' end
  if state == 's' and not due_s then return 'due score is not a due time' end
  return nil
end

local function quarantine_check(q, counts)
  if #q == 0 then return nil end
  counters_add(counts, 'quarantined', #q)
  return check_type(KEYS[9], 'hash')
end

local function quarantine_probes(q)
  if #q == 0 then return nil end
  return probe('HDEL', KEYS[2]) or probe('HSET', KEYS[9])
end

local function quarantine_reply(q, reply, at)
  reply[at] = fmt(#q)
  for _, b in ipairs(q) do
    reply[#reply + 1] = b[1]
    reply[#reply + 1] = b[3]
  end
end

local function quarantine_write(q, now_s)
  if #q == 0 then return end
  local qset, qdel = {}, {}
  for _, b in ipairs(q) do
    qdel[#qdel + 1] = b[1]
    qset[#qset + 1] = b[1]
    qset[#qset + 1] = now_s .. ':' .. b[2] .. ':' .. b[3] .. ':' .. b[4]
  end
  redis.call('HSET', KEYS[9], unpack(qset))
  redis.call('HDEL', KEYS[2], unpack(qdel))
end
