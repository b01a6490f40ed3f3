-- quarantine (include): move due members that cannot fire aside, into the
-- quarantine hash KEYS[9], for claim.lua and hold.lua, and drop their meta.
-- includes: acl_probe check_hash check_type counters fmt probe refusal
--
-- A due member whose record is malformed (decode), or whose due score is
-- no due time (score_ms), cannot fire, and failing the claim for it would
-- stop every timer of the shard behind it. quarantine_why says whether a
-- due member with a record is one (its reason, or nil); the caller
-- collects them as {id, score, reason, rec} in a list q, and then
-- quarantine_check checks KEYS[9]'s type, counts them in the caller's
-- counters batch (field quarantined, includes/counters.lua) and reads their
-- meta from the timer meta hash metas (keyspace TimerMeta) the caller
-- names, quarantine_probes probes the writes, quarantine_reply appends q's
-- count and {id, reason} pairs to a reply, and quarantine_write moves each
-- record, byte for byte, from the timers hash (KEYS[2]) to KEYS[9], and
-- deletes its meta and its entry in the owner index owners (keyspace
-- Owners), and their fields in the traces and deliveries hashes the caller
-- names. Removing them from the due set (KEYS[1]) and writing the counts
-- are the caller's.
--
-- The meta goes with the timer: the record leaves the timers hash, its ID
-- is free to be scheduled again, and nothing but purge.lua (which only
-- purges settled records) would ever remove it. Left behind, it kept the
-- owner counting the timer (NextWake) and a bulk cancel by owner or labels
-- visiting it, for ever, and a timer scheduled again under the ID without
-- meta of its own took the old owner and labels. It is not kept in the
-- quarantine either: a quarantine value's raw record is its last field, so
-- a field more would change what every reader of the quarantine (older
-- ones during an upgrade, export files) takes for the record. All of this
-- runs only for a claim that quarantines something: a claim with nothing
-- to quarantine costs what it did. The same holds for the timer's
-- traceparent and endpoint (the traces and deliveries hashes, which the
-- claim moves into a fire's stream entry): left behind, a plain timer
-- scheduled again under the ID would have fired into the old timer's
-- trace and been delivered to its endpoint.
--
-- KEYS[9] keeps "<quarantined_at_ms>:<due score>:<reason>:<raw record>":
-- the score as Redis gave it (never holding ':'), the reason one of the
-- fixed phrases below (no ':' either), and the raw record last.

local function quarantine_why(state, due_s)
  if not state then return 'malformed record' end
  if state == 's' and not due_s then return 'due score is not a due time' end
  return nil
end

-- quarantine_check checks, counts and reads what q's writes need: the
-- quarantine's type; the traces and deliveries hashes' types, keeping in
-- q.sides those that exist, whose fields of q's timers go; and the meta
-- of q's timers in metas and, for those with an owner, the owner index
-- owners' type. It keeps their meta fields in q.metas and their index
-- entries in q.owned ('<owner>\0<id>'), for the probes and writes, and
-- q.metas_key and q.owners_key. An error reply or nil.
local function quarantine_check(q, counts, metas, owners, traces, deliveries)
  if #q == 0 then return nil end
  counters_add(counts, 'quarantined', #q)
  local err = check_type(KEYS[9], 'hash')
  if err then return err end
  local ids = {}
  for i, b in ipairs(q) do ids[i] = b[1] end
  q.ids = ids
  local exists
  for _, key in ipairs({traces, deliveries}) do
    exists, err = check_hash(key)
    if err then return err end
    if exists then
      q.sides = q.sides or {}
      q.sides[#q.sides + 1] = key
    end
  end
  -- Most namespaces give no timer meta: one TYPE says so.
  exists, err = check_hash(metas)
  if err or not exists then return err end
  local values = redis.pcall('HMGET', metas, unpack(ids))
  if values.err then return refusal(values.err, 'HMGET', metas, 'read') end
  for i = 1, #ids do
    local m = values[i]
    if m then
      q.metas = q.metas or {}
      q.metas[#q.metas + 1] = ids[i]
      -- The owner as meta.lua writes it, and purge.lua reads it.
      local owner = string.match(m, '^%d*\31[^\31]*\31([^\31]+)')
      if owner then
        q.owned = q.owned or {}
        q.owned[#q.owned + 1] = owner .. '\0' .. ids[i]
      end
    end
  end
  q.metas_key, q.owners_key = metas, owners
  return q.owned and check_type(owners, 'zset') or nil
end

-- quarantine_probes asks for q's writes; the caller's earlier probe
-- decided the OOM policy, and HDEL and ZREM never grow memory, so the
-- meta's deletes only ask the ACL (their keys' types checked above).
local function quarantine_probes(q)
  if #q == 0 then return nil end
  local err = probe('HDEL', KEYS[2]) or probe('HSET', KEYS[9]) or (q.metas and acl_probe('HDEL', q.metas_key)) or
    (q.owned and acl_probe('ZREM', q.owners_key))
  if err then return err end
  for _, key in ipairs(q.sides or {}) do
    err = acl_probe('HDEL', key)
    if err then return err end
  end
  return nil
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
  if q.metas then redis.call('HDEL', q.metas_key, unpack(q.metas)) end
  if q.owned then redis.call('ZREM', q.owners_key, unpack(q.owned)) end
  for _, key in ipairs(q.sides or {}) do redis.call('HDEL', key, unpack(q.ids)) end
end
