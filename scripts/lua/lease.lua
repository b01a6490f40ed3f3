-- lease.lua: hand one consumer of a group a batch of one shard's fire
-- events, each under a lease (queue.Lease). Every bit of state lives in
-- Redis, in the group's pending entry list (who holds an entry, since when,
-- how often it was delivered) and in the scan cursor below, so that any
-- stateless caller may run it for any consumer, one after the other.
--
-- KEYS[1..7] the shard's seven keys (prelude.lua); only KEYS[6] fires, the
--            shard's fire stream, is read or written
-- KEYS[8] dead     STREAM the shard's dead-letter stream
-- KEYS[9] cursors  HASH   group -> fire stream entry ID where the next scan
--                  for expired leases resumes; no field: at the start
-- ARGV[1] group
-- ARGV[2] consumer
-- ARGV[3] lease_ms: a delivery left unacknowledged this long has lost its
--         lease and is handed to the next consumer that asks
-- ARGV[4] max_attempts: a delivery count above it is dead-lettered instead
-- ARGV[5] count: most events to hand over (1..1000)
-- ARGV[6] dead_maxlen: approximate bound of the dead-letter stream; 0 = none
-- Reply: {now_ms, last, e_1, ..., e_k}, k <= count, each e = {stream_id, attempt,
--        field_1, value_1, ...}: first the reclaimed deliveries whose lease
--        expired (attempt = Redis's delivery count), then new entries
--        (attempt 1). now_ms is the server clock when they were delivered:
--        each lease ends at now_ms + lease_ms. last is '' unless the call
--        found nothing to do at all; then it is the stream's last entry ID
--        ('0-0' if empty), after which new entries may be awaited (XREAD).
-- Complexity: O(c log P) for the scan, which visits at most 10 c pending
--        entries in all (XAUTOCLAIM's own bound, twice at most when it wraps
--        round), plus O(c) for the new entries, for c = count and P
--        pending entries; one XPENDING per reclaimed entry.
--
-- Like queue.Consume, and into the same dead-letter stream with the same
-- fields (consume.go, deadLetter): a reclaimed delivery whose count now
-- exceeds max_attempts is appended to the dead-letter stream and
-- acknowledged; an entry requeued for another group (for_group, see
-- requeue.lua) is acknowledged and skipped. The group is created on first
-- use at the start of the stream, as Consume creates it.
--
-- The scan uses XAUTOCLAIM, which reclaims at most count entries and looks
-- at most at 10 count pending ones per call; the cursor makes successive
-- calls, by any caller, cover the whole pending list in turn.
--
-- Phases (prelude.lua): reads and checks; probes, XACK first: Redis never
-- refuses XACK for memory, so once it ran the script is past the OOM check
-- and a shard at maxmemory keeps handing out, reclaiming and
-- dead-lettering (small, and it empties the pending list); then the writes.

local err = check_type(KEYS[6], 'stream') or check_type(KEYS[8], 'stream') or check_type(KEYS[9], 'hash')
if err then return err end

local group, consumer = ARGV[1], ARGV[2]
local lease, max_attempts = tonumber(ARGV[3]), tonumber(ARGV[4])
local count, maxlen = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()

-- XPENDING's summary answers NOGROUP when the group (or the stream) does
-- not exist, and otherwise says how many entries are pending.
local exists, pending = true, 0
local summary = redis.pcall('XPENDING', KEYS[6], group)
if type(summary) == 'table' and summary.err then
  if not string.find(summary.err, 'NOGROUP', 1, true) then return refusal(summary.err, 'XPENDING', KEYS[6], 'read') end
  exists = false
else
  pending = tonumber(summary[1])
end
local stored = exists and redis.call('HGET', KEYS[9], group) or false

-- Phase 2: probes.
local r = redis.pcall('XACK', KEYS[6], group, '0-0')
if type(r) == 'table' and r.err and not string.find(r.err, 'NOGROUP', 1, true) then
  return refusal(r.err, 'XACK', KEYS[6])
end
err = probe_all({{'XADD', KEYS[8]}, {'HSET', KEYS[9]}, {'HDEL', KEYS[9]}})
if err then return err end

-- Phase 3: writes.
if not exists then
  redis.call('XGROUP', 'CREATE', KEYS[6], group, '0', 'MKSTREAM')
end

local out, dead, acks = {}, {}, {}

-- route sorts one delivery: handed over, dead-lettered or skipped.
local function route(id, fields, attempt)
  for i = 1, #fields, 2 do
    if fields[i] == 'for_group' and fields[i + 1] ~= group then
      acks[#acks + 1] = id
      return
    end
  end
  if attempt > max_attempts then
    dead[#dead + 1] = {id, fields, attempt}
  else
    local e = {id, fmt(attempt)}
    for i = 1, #fields do e[#e + 1] = fields[i] end
    out[#out + 1] = e
  end
end

if pending > 0 then
  local start = stored or '0-0'
  local cursor = start
  for _ = 1, 2 do
    local want = count - #out
    if want <= 0 then break end
    local claimed = redis.call('XAUTOCLAIM', KEYS[6], group, consumer, lease, start, 'COUNT', want)
    for _, e in ipairs(claimed[2]) do
      -- A Redis before 7.0 lists a deleted entry as nil; 7.0 drops it from
      -- the pending list and reports it in claimed[3].
      if type(e) == 'table' then
        local p = redis.call('XPENDING', KEYS[6], group, e[1], e[1], 1)
        route(e[1], e[2], tonumber(p[1][4]))
      end
    end
    cursor = claimed[1]
    -- Wrapped round from the middle: scan the start once in this call too.
    if cursor ~= '0-0' or start == '0-0' then break end
    start = '0-0'
  end
  if cursor ~= (stored or '0-0') then
    if cursor == '0-0' then
      redis.call('HDEL', KEYS[9], group)
    else
      redis.call('HSET', KEYS[9], group, cursor)
    end
  end
end

local want = count - #out
if want > 0 then
  local res = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', want, 'STREAMS', KEYS[6], '>')
  if res then
    for _, e in ipairs(res[1][2]) do route(e[1], e[2], 1) end
  end
end

-- Dead letters, field for field as queue.Consume writes them: the event's
-- id, due, fired and payload, its other fields in name order, then why.
for _, d in ipairs(dead) do
  local id, fields, attempt = d[1], d[2], d[3]
  local by, rest, vals = {}, {}, {}
  for i = 1, #fields, 2 do by[fields[i]] = fields[i + 1] end
  for _, k in ipairs({'id', 'due', 'fired', 'payload'}) do
    if by[k] then
      vals[#vals + 1] = k
      vals[#vals + 1] = by[k]
      by[k] = nil
    end
  end
  for k in pairs(by) do rest[#rest + 1] = k end
  table.sort(rest)
  for _, k in ipairs(rest) do
    vals[#vals + 1] = k
    vals[#vals + 1] = by[k]
  end
  vals[#vals + 1] = 'error'
  vals[#vals + 1] = 'delivered ' .. fmt(attempt) ..
    ' times without an acknowledgement (each lease expired: its consumer crashed, stopped or worked past the lease)'
  for _, v in ipairs({'attempts', fmt(attempt), 'group', group, 'consumer', consumer, 'stream_id', id}) do
    vals[#vals + 1] = v
  end
  if maxlen > 0 then
    redis.call('XADD', KEYS[8], 'MAXLEN', '~', maxlen, '*', unpack(vals))
  else
    redis.call('XADD', KEYS[8], '*', unpack(vals))
  end
  acks[#acks + 1] = id
end
if #acks > 0 then redis.call('XACK', KEYS[6], group, unpack(acks)) end

-- Nothing handed out, reclaimed or skipped: the stream's last entry ID, after
-- which a caller may wait for new entries with a blocking XREAD.
local last = ''
if #out == 0 and #acks == 0 then
  local tail = redis.call('XREVRANGE', KEYS[6], '+', '-', 'COUNT', 1)
  last = tail[1] and tail[1][1] or '0-0'
end
local reply = {fmt(now), last}
for _, e in ipairs(out) do reply[#reply + 1] = e end
return reply
