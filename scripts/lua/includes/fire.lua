-- fire (include): the fire writer of claim.lua and commit.lua: a batch of
-- scheduled timers written as fired, with their checks, probes, messages
-- and writes.
-- includes: acl_probe any_exists encode fmt late_field layout pending_end probe publish take_values
--
-- A batch (fire_batch) collects the timers firing at one time now_ms:
-- fire_add queues one, fire_read moves their traceparents (KEYS[8]) and
-- endpoints (the deliveries hash the batch names) into their events,
-- fire_reply appends them to a reply, fire_probes probes every write,
-- fire_publish sends each timer's wakeup, and
-- fire_write writes: one fire stream entry each (KEYS[6], through the
-- caller's xadd, which picks the entry IDs and the trim), then the rest
-- (fire_write_rest): the record rewritten as fired (KEYS[2]), the traces
-- and deliveries dropped, the fired set (KEYS[3]) and the expire set
-- (KEYS[5], when retention > 0). A caller may instead run its own XADDs,
-- with fire_fields, and then fire_write_rest.
-- fire_add counts each timer in the caller's counters batch (a table
-- field -> increment, includes/counters.lua): fired, late_sum_ms and
-- late_field's bucket, which the caller probes and writes with its other
-- counts. An event is
-- {id, due_ms, payload, traceparent or nil, deliveries value or nil,
-- the caller's or nil, the fired record, timer meta or nil}. A timer's
-- meta (owner, epoch, labels, deadline: keyspace TimerMeta, in the hash
-- the batch names) is copied into its entry as the field meta, and stays
-- with the record until purge.
-- Removing the timers from the due set (KEYS[1]) is the caller's in
-- layout 1. In layout 2 the fired band replaces the fired and expire sets:
-- fire_write_rest moves each timer from its due time to BAND_FIRED +
-- now_ms in KEYS[1], one ZADD that is also its removal from the pending
-- timers, so a caller removes only the members that did not fire.
--
-- A claim runs all of this for every timer it fires, and the Lua between
-- its commands costs about as much as the commands (BENCHMARKS.md, "Less
-- Lua a claim"): the writes' argument lists are built from the events
-- when they run, and not at all for one timer, an event without a
-- traceparent or endpoint goes to XADD without a table (fire_fields), and
-- the loops are numeric (ipairs calls a C function each step).

-- fire_batch starts a batch firing at now (ms, a number); now_s is now
-- formatted (fmt) if the caller has it, else nil. The purge time is
-- layout 1's (the expire set): layout 2 purges by the fired band's fire
-- times, and formatting it cost its claims a string.format each.
local function fire_batch(now, retention, deliveries, counts, now_s, metas)
  return {now = now, now_s = now_s or fmt(now), retention = retention,
    purge_at = LAYOUT == 1 and retention > 0 and fmt(now + retention) or nil, deliveries = deliveries,
    metas = metas, counts = counts, events = {}}
end

-- fire_add queues the scheduled timer id, due at due_s (whole ms), and
-- returns its event.
local function fire_add(f, id, due_s, created, payload)
  local e = {id, due_s, payload, nil, nil, nil, encode('f', due_s, created, f.now_s, payload)}
  local events = f.events
  events[#events + 1] = e
  local late = f.now - tonumber(due_s)
  if late < 0 then late = 0 end
  -- counters_add, inline: three calls a timer cost a claim more than
  -- the counting.
  local c, b = f.counts, late_field(late)
  c.fired = (c.fired or 0) + 1
  c.late_sum_ms = (c.late_sum_ms or 0) + late
  c[b] = (c[b] or 0) + 1
  return e
end

-- fire_read reads the traceparents and endpoints of the batch, checking
-- both hashes' types; it returns an error reply or nil. Most namespaces
-- trace and deliver no timer, and then neither hash exists: one EXISTS of
-- both (any_exists) answers for the two.
local function fire_read(f)
  local none = {} -- never written to: both may share it
  f.traced, f.delivering = none, none
  if #f.events == 0 then return nil end
  local some = any_exists(KEYS[8], f.deliveries, f.metas)
  if some == 0 then return nil end
  local err
  f.traced, err = take_values(KEYS[8], f.events, 4, some)
  if err then return err end
  f.delivering, err = take_values(f.deliveries, f.events, 5, some)
  if err or not f.metas then return err end
  -- The meta is read, not taken: it stays with the record.
  local _
  _, err = take_values(f.metas, f.events, 8, some)
  return err
end

local function fire_reply(f, reply)
  local events, r = f.events, #reply
  for i = 1, #events do
    local e = events[i]
    reply[r + 1] = e[1]
    reply[r + 2] = e[2]
    reply[r + 3] = e[3]
    reply[r + 4] = e[4] or ''
    r = r + 4
  end
end

-- fire_probes probes every write of the batch but the counters'. The
-- fired and expire sets get probes, which check their types too; the other
-- keys' types are checked before (the records by the caller's HMGET, the
-- stream by the caller's TYPE or, in claim.lua, by its first XADD, the
-- traces and deliveries by fire_read),
-- so their writes only need the ACL's yes (acl_probe). A caller whose
-- first write is its first XADD, under pcall (claim.lua), passes
-- xadd_first: that XADD is its own probe, and the ACL check of the stream
-- (about 2,300 instructions) is left out.
local function fire_probes(f, xadd_first)
  if #f.events == 0 then return nil end
  local err
  if LAYOUT == 1 then
    err = probe('ZADD', KEYS[3]) or (f.retention > 0 and probe('ZADD', KEYS[5]))
  else
    -- KEYS[3] is KEYS[1], whose type the caller's read of the due times
    -- checked: only the ACL is left to ask.
    err = acl_probe('ZADD', KEYS[1])
  end
  return err or acl_probe('HSET', KEYS[2]) or (not xadd_first and acl_probe('XADD', KEYS[6])) or
    (#f.traced > 0 and acl_probe('HDEL', KEYS[8])) or (#f.delivering > 0 and acl_probe('HDEL', f.deliveries)) or nil
end

-- fire_publish tells each timer's channel, prefix .. id, 'fired'.
local function fire_publish(f, prefix)
  local events = f.events
  for i = 1, #events do
    local err = publish(prefix .. events[i][1], 'fired')
    if err then return err end
  end
  return nil
end

-- fire_entry is the fire stream entry of event e: id, due, fired, payload,
-- then traceparent, endpoint, flow and meta when the timer has them. The
-- deliveries value is "<endpoint>" or, for a timer with a flow key,
-- "<endpoint>\0<flow key>" (schedule.lua); an empty endpoint is left out.
-- This is the one reader of that value.
local function fire_entry(f, e)
  local entry = {'id', e[1], 'due', e[2], 'fired', f.now_s, 'payload', e[3]}
  if e[4] then
    entry[#entry + 1] = 'traceparent'
    entry[#entry + 1] = e[4]
  end
  local ep, flow = e[5], nil
  -- A plain find, so that a timer without a flow key costs no pattern.
  local z = ep and string.find(ep, '\0', 1, true)
  if z then
    -- Two statements: gopher-lua (miniredis) assigns ep before it
    -- evaluates the second expression of a multiple assignment.
    flow = string.sub(ep, z + 1)
    ep = string.sub(ep, 1, z - 1)
  end
  if ep and ep ~= '' then
    entry[#entry + 1] = 'endpoint'
    entry[#entry + 1] = ep
  end
  if flow then
    entry[#entry + 1] = 'flow'
    entry[#entry + 1] = flow
  end
  if e[8] then
    entry[#entry + 1] = 'meta'
    entry[#entry + 1] = e[8]
  end
  return entry
end

-- fire_fields returns the fields of event e's stream entry (fire_entry),
-- as values to end a call's arguments: without a table for an event that
-- has neither traceparent nor endpoint, the common one.
local function fire_fields(f, e)
  if not e[4] and not e[5] and not e[8] then return 'id', e[1], 'due', e[2], 'fired', f.now_s, 'payload', e[3] end
  return unpack(fire_entry(f, e))
end

-- fire_write_rest writes the batch but its stream entries: the records,
-- the traces and deliveries dropped, the fired and expire sets.
local function fire_write_rest(f)
  local events = f.events
  local n = #events
  if n == 0 then return end
  if n == 1 then
    local e = events[1]
    redis.call('HSET', KEYS[2], e[1], e[7])
  else
    local hset = {}
    for i = 1, n do
      local e = events[i]
      hset[2 * i - 1] = e[1]
      hset[2 * i] = e[7]
    end
    redis.call('HSET', KEYS[2], unpack(hset))
  end
  if #f.traced > 0 then redis.call('HDEL', KEYS[8], unpack(f.traced)) end
  if #f.delivering > 0 then redis.call('HDEL', f.deliveries, unpack(f.delivering)) end
  if LAYOUT == 2 then
    local band = fmt(BAND_FIRED + f.now)
    if n == 1 then
      redis.call('ZADD', KEYS[1], band, events[1][1])
      return
    end
    local zadd = {}
    for i = 1, n do
      zadd[2 * i - 1] = band
      zadd[2 * i] = events[i][1]
    end
    redis.call('ZADD', KEYS[1], unpack(zadd))
    return
  end
  if n == 1 then
    local e = events[1]
    redis.call('ZADD', KEYS[3], e[2], e[1])
    if f.retention > 0 then redis.call('ZADD', KEYS[5], f.purge_at, e[1]) end
    return
  end
  local fired, expire, purge_at = {}, {}, f.purge_at
  for i = 1, n do
    local e = events[i]
    fired[2 * i - 1] = e[2]
    fired[2 * i] = e[1]
    expire[2 * i - 1] = purge_at
    expire[2 * i] = e[1]
  end
  redis.call('ZADD', KEYS[3], unpack(fired))
  if f.retention > 0 then redis.call('ZADD', KEYS[5], unpack(expire)) end
end

local function fire_write(f, xadd)
  local events = f.events
  for i = 1, #events do
    local e = events[i]
    xadd(i, e, fire_entry(f, e))
  end
  fire_write_rest(f)
end
