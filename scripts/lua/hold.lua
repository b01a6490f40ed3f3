-- hold.lua: the first half of a claim in a namespace with replicas
-- (queue.SetReplicas): decide which due timers fire, when, and under which
-- fire stream entry IDs, and write that decision down, without firing
-- anything. The worker then runs WAIT N on the same connection and, once N
-- replicas have the decision, commit.lua makes it visible. A decision that
-- is never committed (its worker died, or its master was demoted and WAIT
-- fell short) is taken over once its lease ends by whoever claims the
-- shard next, on whichever master holds the shard then, with the same
-- fire time and entry IDs: a fire that was seen on a master that then
-- failed is committed again identically, never as a second fire.
--
-- KEYS: the namespace's seven keys, then its traces hash (only its fields of the timers it quarantines, deleted),
--       KEYS[9] its quarantine hash (includes/quarantine.lua), KEYS[10] the shard's
--       hold hash (keyspace.Space.Hold):
--         token  the token of the claim that holds it now
--         lease  server ms until which that claim may commit alone
--         fired  the fire time of every timer held, server ms
--         ms, seq  the fire stream entry ID of the first timer held is
--                ms-seq; the i-th (0-based) is ms-(seq+i)
--         n      how many timers are held
--         i:<i>  "<due>:<id>" of the i-th timer held (0-based), due its exact
--                due score string ("<ms>" or "<ms>.<us>", score_ms)
--         top    the last entry ID a commit added; it outlives the hold
--                (the fields above exist only between a hold and its
--                commit)
--       KEYS[11] its deliveries hash (the same), KEYS[12] its timer meta
--       hash and KEYS[13] its owner index (keyspace TimerMeta, Owners),
--       whose fields and entries of the timers it quarantines it deletes
-- ARGV[1] limit: most timers to hold (1..1000)
-- ARGV[2] lease_ms: how long the claim may commit before another claimer
--         may take it over
-- ARGV[3] token: the new claim's token, unique per call
-- ARGV[4] mine: the token of a claim by the same caller that it gave up
--         on (WAIT fell short); such a hold is taken over at once ('' for
--         none)
-- Reply: {now_ms, next_ms_or_empty, status, q, qid_1, qreason_1, ...}:
--        status 'held' (this call's token holds a decision: run WAIT, then
--        commit.lua), 'busy' (another claim holds one; next_ms is its
--        lease's end) or 'none' (nothing due; next_ms is the earliest due
--        time, or empty); then the q records this call quarantined.
-- Complexity: O(log N + k) for k held timers in a set of N, plus one HSET
--        of k+6 fields, and for q quarantined records as claim.lua; a
--        takeover is O(1).
--
-- Only one decision is held per shard at a time, so commits happen in the
-- order of their holds and each hold can reserve its stream entry IDs
-- above the stream's last one. The timers held stay scheduled (in the due
-- set, with their records) until the commit: Get, Wait, List and Stats
-- report them scheduled, and Cancel or Reschedule may still change them,
-- in which case the commit skips them.

-- One TIME for the fire time and the comparison with the due scores.
local clock = redis.call('TIME')
local now = clock_ms(clock)
local now_s = fmt(now)
local limit = tonumber(ARGV[1])

-- Most holds find no decision held and nothing due, and write nothing:
-- they answer here, from reads that check the types of the keys they
-- read, before the other keys' types are checked and the other includes
-- defined (Script.Early; eight TYPEs and the includes were most of an
-- empty hold). Any other outcome, an error included, takes the path
-- below, which checks every key's type first, as a hold always did.
local held = redis.pcall('HMGET', KEYS[10], 'token', 'lease', 'top')
local due
if not held.err and not held[1] then
  due = redis.pcall('ZRANGEBYSCORE', KEYS[1], '-inf', clock_due(clock), 'WITHSCORES', 'LIMIT', 0, limit)
  if not due.err and #due == 0 then
    local head = pending_at('0')
    return {now_s, head[2] or '', 'none', '0'}
  end
end
-- (the includes are defined here)

local err = check_types()
if err then return err end
err = check_type(KEYS[10], 'hash')
if err then return err end
if held.err then return refusal(held.err, 'HMGET', KEYS[10], 'read') end

local lease = tonumber(ARGV[2])
local token = ARGV[3]
local mine = ARGV[4]

if held[1] then
  if tonumber(held[2] or '0') > now and held[1] ~= mine then
    return {now_s, held[2], 'busy', '0'}
  end
  -- Take over: the decision stays, only the token and lease change. This
  -- write is what the caller's WAIT waits for, and it follows the
  -- decision in the replication stream.
  err = probe_all({{'HSET', KEYS[10]}})
  if err then return err end
  redis.call('HSET', KEYS[10], 'token', token, 'lease', fmt(now + lease))
  return {now_s, '', 'held', '0'}
end

-- The early part read the due timers, unless its read failed (the
-- checks above found no wrong type, so an ACL refusal, which this read
-- raises again).
if not due or due.err then
  due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', clock_due(clock), 'WITHSCORES', 'LIMIT', 0, limit)
end
local n = #due / 2
if n == 0 then
  local head = pending_at('0')
  return {now_s, head[2] or '', 'none', '0'}
end

local ids = {}
for i = 1, n do ids[i] = due[2 * i - 1] end
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
local good = {}        -- {id, due_s}
local quarantined = {} -- {id, score, reason, rec}
local dropped = {}     -- due members without a record or with a settled one
for i = 1, n do
  local id, rec, score = ids[i], recs[i], due[2 * i]
  if not rec then
    dropped[#dropped + 1] = id
  else
    local state = decode(rec)
    local due_s = score_ms(score)
    local why = quarantine_why(state, due_s)
    if why then
      quarantined[#quarantined + 1] = {id, score, why, rec}
    elseif state == 's' then
      good[#good + 1] = {id, due_s}
    else
      dropped[#dropped + 1] = id
    end
  end
end
local counts = counters_batch()
err = quarantine_check(quarantined, counts, KEYS[12], KEYS[13], KEYS[8], KEYS[11])
if err then return err end

-- The entry IDs: above the last one a commit added (top), which nothing
-- but a commit (or a requeue) adds while the hold exists. commit.lua
-- checks them against the stream itself.
local ms, seq = now, 0
if held[3] then
  local tms, tseq = string.match(held[3], '^(%d+)-(%d+)$')
  if tms and tonumber(tms) >= now then ms, seq = tonumber(tms), tonumber(tseq) + 1 end
end

-- When nothing is held, every member read leaves the due set: the one
-- ranked just after them is the earliest due time left, read before the
-- writes.
local head = {}
if #good == 0 then head = pending_at(fmt(n)) end

err = ((#dropped > 0 or #quarantined > 0) and probe('ZREM', KEYS[1])) or
  (#good > 0 and probe('HSET', KEYS[10])) or quarantine_probes(quarantined) or counters_probes(counts)
if err then return err end

local reply = {now_s, '', 'none'}
quarantine_reply(quarantined, reply, 4)

if #dropped > 0 then redis.call('ZREM', KEYS[1], unpack(dropped)) end
if #quarantined > 0 then
  local qdel = {}
  for i, b in ipairs(quarantined) do qdel[i] = b[1] end
  redis.call('ZREM', KEYS[1], unpack(qdel))
end
quarantine_write(quarantined, now_s)
counters_write(counts)
if #good > 0 then
  local hset = {'token', token, 'lease', fmt(now + lease), 'fired', now_s, 'ms', fmt(ms), 'seq', fmt(seq),
    'n', fmt(#good)}
  for i, g in ipairs(good) do
    hset[#hset + 1] = 'i:' .. fmt(i - 1)
    hset[#hset + 1] = g[2] .. ':' .. g[1]
  end
  redis.call('HSET', KEYS[10], unpack(hset))
  reply[3] = 'held'
else
  reply[2] = head[2] or ''
end
return reply
