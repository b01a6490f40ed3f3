-- lease.lua: hand one consumer of a group a batch of one shard's fire
-- events, each under a lease (queue.Lease). Every bit of state lives in
-- Redis, in the group's pending entry list (who holds an entry, since when,
-- how often it was delivered) and in the cursors hash below, so that any
-- stateless caller may run it for any consumer, one after the other.
--
-- KEYS[1..7] the shard's seven keys (includes/check_types.lua); only KEYS[6] fires, the
--            shard's fire stream, is read or written, and KEYS[7] counters
--            gains dead_deadline (see "Deadlines" below)
-- KEYS[8] dead     STREAM the shard's dead-letter stream
-- KEYS[9] cursors  HASH   group..'#quiet' -> server time (ms) before which
--                  the scan for expired leases is skipped (see "Quiet"
--                  below); no field: none. A field named after the group
--                  alone is a scan cursor of earlier versions, not read.
-- ARGV[1] group
-- ARGV[2] consumer
-- ARGV[3] lease_ms: a delivery left unacknowledged this long has lost its
--         lease and is handed to the next consumer that asks
-- ARGV[4] max_attempts: a delivery count above it is dead-lettered instead
-- ARGV[5] count: most events to hand over (1..1000)
-- ARGV[6] dead_maxlen: approximate bound of the dead-letter stream; 0 = none
-- ARGV[7] start: where the group starts if this call creates it, as
--         XGROUP CREATE takes it: '0' (the oldest entry kept) or '$' (after
--         the newest: queue.StartNow)
-- Reply: {now_ms, last, dead, e_1, ..., e_k}, k <= count, each e = {stream_id, attempt,
--        field_1, value_1, ...}: first the reclaimed deliveries whose lease
--        expired (attempt = Redis's delivery count), then new entries
--        (attempt 1), none past its deadline at now_ms. now_ms is the server
--        clock when they were delivered: each lease ends at now_ms +
--        lease_ms. last, when not '', is the
--        stream's last entry ID ('0-0' if empty), after which new entries
--        may be awaited (XREAD): the group has nothing more to hand out
--        (see "Drained" below). '' means it may have more: ask again.
--        dead lists the entries this call dead-lettered instead of handing
--        out, each {stream_id, attempt, dead_letter_id, reason, cause,
--        field_1, value_1, ...}: reason 'deadline' (Deadlines below) or
--        'attempts' (a reclaim past max_attempts), attempt the one it would
--        have been, as in e; so that a dispatcher can log the attempt it
--        did not make (queue.LeaseOptions.OnDeadLetter). Usually empty.
-- Complexity: O(P + c log P) for the scan, which walks the pending entry
--        list (about 0.1 us an entry: it reads no stream entry) and
--        reclaims at most c, plus O(c) for the new entries, for c = count
--        and P pending entries. A quiet call (below) scans nothing.
--
-- Into the same dead-letter stream with the same fields as release.lua
-- (queue.Consume runs on both): a reclaimed delivery whose count now
-- exceeds max_attempts is appended to the dead-letter stream and
-- acknowledged; an entry requeued for another group (for_group, see
-- requeue.lua) is acknowledged and skipped. The group is created on first
-- use at ARGV[7].
--
-- Deadlines: an entry whose timer has a deadline (its field meta,
-- includes/deadline.lua) that now_ms is past is not handed out, new or
-- reclaimed, requeued or not: it is dead-lettered with the reason deadline
-- (its attempts the deliveries it had: 0 for a new entry, whose consumer
-- is ''), acknowledged and counted (counters_write: dead_deadline). An entry
-- without meta costs the comparison of one more field name in the loop
-- that looks for for_group, and nothing else. Only an entry's fields say
-- its deadline, and they come with the writes that read it (XCLAIM,
-- XREADGROUP), so the counters and the dead-letter stream are checked
-- (deadline_keys: their types, and the rights to HINCRBY and HSET the counters;
-- the right to XADD a dead letter is probed on every call) as follows. A
-- call that reclaims checks them before its XCLAIM: a reclaimed entry may
-- die of its attempts or of its deadline. A call that finds a new entry
-- past its deadline checks them after its XREADGROUP (a TYPE, a check or
-- a probe refused is a value there, never an error), and if one fails
-- leaves such entries pending, neither handed out nor dead-lettered: their
-- leases run out, and the call that reclaims them names the wrong key or
-- the missing right before it writes anything. A call that does neither,
-- the common one, checks nothing more than it did before deadlines.
--
-- The scan is XPENDING IDLE, which walks the pending entry list from the
-- start and lists up to count entries whose lease ran out, then one XCLAIM
-- of those (with the lease as min-idle). It replaced XAUTOCLAIM, which
-- looks each entry up in the stream, at several microseconds an entry,
-- and at 10 count entries per call that was most of Redis's work per
-- delivery under load.
--
-- Quiet: when the group has more than QUIET_PENDING entries pending and a
-- scan found fewer expired leases than it could take (none left), the
-- scan pauses for lease / 10, at most QUIET_MAX_MS, for every caller: an
-- expired lease, or the end of a release's delay, is then seen up to that
-- much later. A short pending list is scanned at every call.
--
-- Drained: a call whose scan took fewer expired leases than count (or
-- did not scan) and whose XREADGROUP read fewer new entries than it asked
-- for has left the group nothing to hand out; it returns as last the ID of
-- the last entry it read, the stream's last, at no cost. A call that did
-- nothing at all reads it (XREVRANGE). A caller that got entries and a
-- last may then wait for new entries without another call first
-- (queue.Leaser): with 4 dispatchers, such empty calls were most of the
-- lease calls (BENCHMARKS.md, "Delivery at 2,000/s: one lease call fewer
-- a batch").
--
-- Phases (includes/probe.lua): reads and checks; probes, XACK first: Redis never
-- refuses XACK for memory, so once it ran the script is past the OOM check
-- and a shard at maxmemory keeps handing out, reclaiming and
-- dead-lettering (small, and it empties the pending list); then the writes.
--
-- Types are checked where a command would meet them, on its error path,
-- not with a TYPE of each key on every call (three TYPEs a call, which
-- the calls that find nothing wrong paid for nothing): the fire stream by the XPENDING
-- summary, which answers WRONGTYPE for any other type; the cursors hash
-- by its HGET, which runs whenever the HSET may (pending > 0), both
-- before any write; the dead-letter stream and the counters by a TYPE
-- each only when the scan finds expired deliveries, which may be
-- dead-lettered, before its XCLAIM, the first write of a call that scans
-- (the group exists, so no XGROUP CREATE ran), or when a new entry turns
-- out to be past its deadline (Deadlines above). A key that a command does
-- not touch is not checked.

local err

local group, consumer = ARGV[1], ARGV[2]
local lease, max_attempts = tonumber(ARGV[3]), tonumber(ARGV[4])
local count, maxlen = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()

-- XPENDING's summary answers NOGROUP when the group (or the stream) does
-- not exist, and otherwise says how many entries are pending.
local exists, pending = true, 0
-- Any other type answers WRONGTYPE, whose message check_type writes (or
-- layout_marker's, for a key a later layout retired).
local summary = redis.pcall('XPENDING', KEYS[6], group)
if type(summary) == 'table' and summary.err then
  if string.find(summary.err, 'WRONGTYPE', 1, true) then
    return check_type(KEYS[6], 'stream') or redis.error_reply(summary.err)
  end
  if not string.find(summary.err, 'NOGROUP', 1, true) then return refusal(summary.err, 'XPENDING', KEYS[6], 'read') end
  exists = false
else
  pending = tonumber(summary[1])
end
local QUIET_PENDING, QUIET_MAX_MS = 128, 100
local quiet_field = group .. '#quiet'
local quiet = 0
if pending > 0 then
  local q = redis.pcall('HGET', KEYS[9], quiet_field)
  if type(q) == 'table' and q.err then
    if string.find(q.err, 'WRONGTYPE', 1, true) then
      return check_type(KEYS[9], 'hash') or redis.error_reply(q.err)
    end
    return refusal(q.err, 'HGET', KEYS[9], 'read')
  end
  quiet = tonumber(q or '0')
end

-- Phase 2: probes.
local r = redis.pcall('XACK', KEYS[6], group, '0-0')
if type(r) == 'table' and r.err and not string.find(r.err, 'NOGROUP', 1, true) then
  return refusal(r.err, 'XACK', KEYS[6])
end
-- The dead-letter stream's type is checked before the first dead letter,
-- and the cursors hash's by the HGET above before its HSET, so only the
-- ACL can refuse their writes (acl_probe).
err = acl_probe('XADD', KEYS[8]) or acl_probe('HSET', KEYS[9])
if err then return err end
-- XREADGROUP and XREVRANGE run after the first write (the group's creation,
-- a reclaim), so their rights are checked here: by redis.acl_check_cmd
-- where it exists (Redis 7.0 and later), which runs no command, else (or
-- when it says no, so that the refusal names the right) by running them.
-- The XREVRANGE probe used to read the stream's last entry, whose fields
-- Redis turned into a Lua table and back (about 30,000 instructions of a
-- 215,000 lease of one fire, callgrind); the XREADGROUP one built an error
-- reply. No group is named '': that read fails with NOGROUP once Redis has
-- checked the rights, reading nothing; the XREVRANGE range is empty.
local acl_check = redis.acl_check_cmd
if not (acl_check and acl_check('XREADGROUP', 'GROUP', group, consumer, 'COUNT', '1', 'STREAMS', KEYS[6], '>')) then
  r = redis.pcall('XREADGROUP', 'GROUP', '', consumer, 'COUNT', 1, 'STREAMS', KEYS[6], '0')
  if type(r) == 'table' and r.err and not string.find(r.err, 'NOGROUP', 1, true) then
    return refusal(r.err, 'XREADGROUP', KEYS[6])
  end
end
if not (acl_check and acl_check('XREVRANGE', KEYS[6], '+', '-', 'COUNT', '1')) then
  local _, refused = read_probe('XREVRANGE', KEYS[6], '-', '+')
  if refused then return refused end
end

-- Phase 3: writes.
if not exists then
  redis.call('XGROUP', 'CREATE', KEYS[6], group, ARGV[7], 'MKSTREAM')
end

local out, dead, acks = {}, {}, {}
local late -- the entries past their deadline, made by the first one
local owners = {} -- stream ID -> the consumer that held it before this reclaim
local checked = false -- deadline_keys passed

-- route sorts one delivery: handed over, dead-lettered (of its attempts or
-- its deadline) or skipped.
local function route(id, fields, attempt)
  local deadline
  for i = 1, #fields, 2 do
    local k = fields[i]
    if k == 'for_group' then
      if fields[i + 1] ~= group then
        acks[#acks + 1] = id
        return
      end
    elseif k == 'meta' then
      deadline = deadline_ms(fields[i + 1])
    end
  end
  if deadline and now > deadline then
    late = late or {}
    late[#late + 1] = {id, fields, attempt, deadline}
  elseif attempt > max_attempts then
    dead[#dead + 1] = {id, fields, attempt}
  else
    local e = {id, fmt(attempt)}
    for i = 1, #fields do e[#e + 1] = fields[i] end
    out[#out + 1] = e
  end
end

local scan_full = false -- the scan took count: more may have expired
if pending > 0 and now >= quiet then
  local expired = redis.call('XPENDING', KEYS[6], group, 'IDLE', lease, '-', '+', count)
  scan_full = #expired >= count
  if #expired > 0 then
    local ids, attempts = {}, {}
    for i, p in ipairs(expired) do
      ids[i] = p[1]
      attempts[p[1]] = tonumber(p[4]) + 1 -- XCLAIM counts a delivery
      -- The consumer whose lease ran out, which a dead letter names: the
      -- XCLAIM below makes the caller the owner.
      owners[p[1]] = p[2]
    end
    -- Nothing was written yet (the group exists: no XGROUP CREATE). Any
    -- reclaimed entry may die, of its attempts or of its deadline
    -- (Deadlines above), which only the XCLAIM's reply says.
    err = deadline_keys()
    if err then return err end
    checked = true
    -- A deleted entry is left out of the reply, and out of the pending
    -- list (Redis 7.0; before, it was listed as nil).
    local claimed = redis.call('XCLAIM', KEYS[6], group, consumer, lease, unpack(ids))
    for _, e in ipairs(claimed) do
      if type(e) == 'table' then route(e[1], e[2], attempts[e[1]]) end
    end
  end
  if #expired < count and pending > QUIET_PENDING then
    redis.call('HSET', KEYS[9], quiet_field, fmt(now + math.min(math.floor(lease / 10), QUIET_MAX_MS)))
  end
end

local want = count - #out
local read_last = '' -- the last new entry read, when fewer than want (Drained)
if want > 0 then
  local res = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', want, 'STREAMS', KEYS[6], '>')
  if res then
    local entries = res[1][2]
    for _, e in ipairs(entries) do route(e[1], e[2], 1) end
    if #entries > 0 and #entries < want and not scan_full then read_last = entries[#entries][1] end
  end
end

-- New entries past their deadline found the keys unchecked: checked now,
-- after the XREADGROUP, under pcall, so that a refusal is a value; they
-- are left pending if a check fails (Deadlines above).
if late and not checked then
  local ok, e = pcall(deadline_keys)
  if not ok or e then late = nil end
end

-- Dead letters, as release.lua writes them (includes/dead_letter.lua),
-- naming the consumer whose last lease ran out ('' for a new entry).
local died = {} -- the reply's dead
local function report(id, attempts, dead_id, reason, cause, fields)
  local e = {id, fmt(attempts), dead_id, reason, cause}
  for i = 1, #fields do e[#e + 1] = fields[i] end
  died[#died + 1] = e
end
if late then
  for _, d in ipairs(late) do
    local id, attempt = d[1], d[3]
    local cause = deadline_cause(d[4], 'not handed out', now)
    report(id, attempt, dead_letter(d[2], cause, attempt - 1, group, owners[id] or '', id, maxlen), 'deadline', cause, d[2])
    acks[#acks + 1] = id
  end
  counters_write({dead_deadline = #late})
end
for _, d in ipairs(dead) do
  local id, attempt = d[1], d[3]
  local cause = 'delivered ' .. fmt(attempt) ..
    ' times without an acknowledgement (each lease expired: its consumer crashed, stopped or worked past the lease)'
  report(id, attempt, dead_letter(d[2], cause, attempt, group, owners[id], id, maxlen), 'attempts', cause, d[2])
  acks[#acks + 1] = id
end
if #acks > 0 then redis.call('XACK', KEYS[6], group, unpack(acks)) end

-- Nothing handed out, reclaimed or skipped: the stream's last entry ID, after
-- which a caller may wait for new entries with a blocking XREAD; or that of
-- the last new entry read, when the call drained the group (Drained).
local last = read_last
if #out == 0 and #acks == 0 then
  local tail = redis.call('XREVRANGE', KEYS[6], '+', '-', 'COUNT', 1)
  last = tail[1] and tail[1][1] or '0-0'
end
local reply = {fmt(now), last, died}
for _, e in ipairs(out) do reply[#reply + 1] = e end
return reply
