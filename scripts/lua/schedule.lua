-- schedule.lua: create timers that do not exist yet; leave existing ones alone.
--
-- KEYS: the namespace's seven keys, then its traces hash (see includes/check_types.lua),
--       then KEYS[9] the shard's deliveries hash (id -> endpoint name) and
--       KEYS[10] the shard's endpoint names hash (keyspace EndpointNames:
--       with one shard, the namespace's endpoints hash itself),
--       KEYS[11] the shard's timer meta hash (id -> meta, keyspace TimerMeta),
--       KEYS[12] its owners index (ZSET, '<owner>\0<id>' at score 0),
--       KEYS[13] its owners' epochs (HASH owner -> epoch, read only), and
--       with one shard only, KEYS[14] the namespace's meta key (read only)
-- ARGV[1]        wake channel, told the new earliest due_ms when it moves earlier
-- ARGV[2]        traceparent of the scheduling span, kept in KEYS[8] for each
--                timer created, so the fire continues its trace; '' for none
-- ARGV[3]        the shard's pending-timer quota (queue.Quotas.Pending, per
--                shard): the most timers KEYS[1] may hold once the call
--                added its own; '0' for none
-- ARGV[4+5i..]   quintuples: id, due, payload, endpoint, meta (validated by the
--                client); due is a due score ('<ms>' or '<ms>.<us>', see
--                includes/fmt_due.lua), or '+<ms>.<us>' for that long after
--                the server's clock (see includes/resolve_due.lua);
--                endpoint is the name of the endpoint the fire is delivered
--                to, '' for a timer that does not deliver, and after a space
--                the timer's own delivery URL if it has one; with a flow key,
--                "\0<flow key>" follows (and the endpoint may be ''). The
--                value is kept whole in KEYS[9], only the name is checked;
--                claim.lua splits off the flow key into the field flow;
--                meta is '' for a timer without owner, labels or deadline,
--                else '<expected epoch>\31<deadline>\31<owner>' and
--                '\31<key>=<value>' per label: expected epoch '' takes the
--                owner's current one (KEYS[13]), digits must equal it;
--                deadline '' for none, '<ms>', or '+<ms>' after the due ms.
--                The timer's meta is stored as '<epoch>\31<deadline ms>
--                \31<owner>...' in KEYS[11], and an owner indexed in KEYS[12]
-- Reply: {now_ms, flags, extra...}. flags holds one byte per timer, in
--        order: '1' created with the due_ms it was given (the client knows
--        the record: state s, that due, created now_ms, its payload); '2'
--        created with a relative due, whose due_ms is the next extra; '0'
--        not created, because the ID already existed in any state (or came
--        earlier in this call), whose record (with its due time filled in,
--        as full() does) is the next extra. Only existing and relative
--        timers cost an extra, so a bulk of new timers replies two strings.
--        A timer with meta (a new one given meta, an existing one that has
--        it) has the flag 'a', 'b' or 'c' for '0', '1' or '2', and its
--        stored meta is one more extra, after the others of the timer.
--        A new owned timer whose expected epoch is not its owner's current
--        one is refused: 'TIMERQ_EPOCH <current> <owner>', nothing written.
--        A new timer whose absolute deadline is before its due millisecond
--        (a relative due time, which only the server's clock resolves) is
--        refused: 'TIMERQ_FIREBY <deadline ms> <due> <id>', nothing written.
--        A new delivering timer whose endpoint KEYS[10] does not name is
--        refused: the error 'TIMERQ_NOENDPOINT <name>', and nothing written.
--        A call in the one-shard layout of a namespace whose meta key now
--        says more shards (created after the client read its layout) is
--        refused: 'TIMERQ_RELAYOUT <shards>', and nothing written, so that
--        no timer lands where no worker claims it; the client re-reads.
--        A call whose new timers would take KEYS[1] past ARGV[3] is
--        refused whole: 'TIMERQ_QUOTA pending <quota> <held> <adding>',
--        and nothing written (an ID that exists adds nothing).
-- Complexity: O(k log N) for k timers in a set of N (plus one HSET of k
--        fields when traced, and one HEXISTS per distinct endpoint and one
--        HSET of the delivering timers when some deliver).
--
-- Idempotent by ID: an existing record, even fired or cancelled, is returned
-- unchanged, so a replaying caller never re-arms a timer that already fired.
-- All or nothing: it checks and probes before its first write (includes/probe.lua),
-- so a refusal (ACL, OOM) creates none of the timers.
--
-- Cheap per call: it writes only KEYS[1] and KEYS[2] (and KEYS[8], KEYS[9]
-- when some timer is traced or delivers), so it checks the types of those
-- alone, and the two reads it needs anyway (the due set's head, the
-- records) check KEYS[1] and KEYS[2]: a TYPE runs only to word the error
-- when one is refused. The first write, HSET of KEYS[2], needs no probe:
-- Redis refuses it, if at all, before it changes anything, and the writes
-- after it need only the ACL's yes (acl_probe).

-- read runs a read that doubles as the type check of key, which timerq
-- keeps as a want: it returns the reply, or nil and an error reply.
local function read(want, cmd, key, ...)
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, 9) == 'WRONGTYPE' then
      return nil, check_type(key, want) or redis.error_reply(r.err)
    end
    return nil, refusal(r.err, cmd, key, 'read')
  end
  return r, nil
end

local now = clock_now()
if #ARGV < 4 then return {now, ''} end
if KEYS[14] then
  local shards = redis.call('HGET', KEYS[14], 'shards')
  if shards and shards ~= '1' then return redis.error_reply('TIMERQ_RELAYOUT ' .. shards) end
end

-- Phase 1: read the due set's head and every record, check every argument.
local head, err = read('zset', 'ZRANGEBYSCORE', KEYS[1], '-inf', PENDING_END, 'WITHSCORES', 'LIMIT', '0', '1')
if err then return err end
local wake_head = tonumber(head[2])
local ids, n = {}, 0
for i = 4, #ARGV, 5 do
  n = n + 1
  ids[n] = ARGV[i]
end
local recs
recs, err = read('hash', 'HMGET', KEYS[2], unpack(ids))
if err then return err end

-- The loop below runs once per timer: it keeps counts rather than using
-- the length operator, and string.match and tonumber as locals. The
-- extras go straight into the reply, after its two strings; the tables
-- that only some calls fill are made when first needed (a table costs
-- about as much as a short string.format).
local match, number = string.match, tonumber
local flags, nextra = {}, 0
local reply = {now, ''}
-- The write lists start with the slots of one timer, which the first
-- created timer fills: a list grown from empty is resized twice for it.
local hset, zadd, nw = {false, false}, {false, false}, 0
local trace = ARGV[2] ~= ''
local traced = trace and {false, false} or nil
local delivers = nil      -- id, endpoint value, ...
local created = n > 1 and {} or nil -- id -> index of the timer that created it
local resolved = nil      -- index -> due_ms, for relative due times only
local endpoints = nil     -- name -> true once checked
local metas = meta_batch(KEYS[11], KEYS[12], KEYS[13])
local stored_meta = nil   -- index -> stored meta
local value = 's::' .. now .. '::' -- a new record, but for its payload
local earliest = wake_head
for k = 1, n do
  local id, rec = ids[k], recs[k]
  if rec then
    local state = decode(rec)
    if not state then return malformed(id, 'has a malformed record') end
    if state == 's' and not due_of(id) then
      return malformed(id, 'is scheduled but has no due time in ' .. KEYS[1])
    end
    local m
    m, err = read('hash', 'HGET', KEYS[11], id)
    if err then return err end
    flags[k] = m and 'a' or '0'
    nextra = nextra + 1
    reply[nextra + 2] = full(id, rec)
    if m then
      nextra = nextra + 1
      reply[nextra + 2] = m
    end
  elseif created and created[id] then
    -- A repeated ID within the call: created once, by its first occurrence.
    local first = created[id]
    local m = stored_meta and stored_meta[first]
    flags[k] = m and 'a' or '0'
    nextra = nextra + 1
    reply[nextra + 2] = encode('s', resolved and resolved[first] or ARGV[5 * first], now, '', ARGV[5 * first + 1])
    if m then
      nextra = nextra + 1
      reply[nextra + 2] = m
    end
  else
    local arg, endpoint, meta = ARGV[5 * k], ARGV[5 * k + 2], ARGV[5 * k + 3]
    local due = resolve_due(arg)
    if not is_due(due) then
      return redis.error_reply('ERR timerq: due time "' .. due .. '" of timer "' .. id ..
        '" is not a due time in milliseconds')
    end
    nw = nw + 2
    hset[nw - 1], hset[nw] = id, value .. ARGV[5 * k + 1]
    zadd[nw - 1], zadd[nw] = due, id
    if meta ~= '' then
      local m
      m, err = meta_add(metas, id, due, meta)
      if err then return err end
      stored_meta = stored_meta or {}
      stored_meta[k] = m
    end
    if trace then
      traced[nw - 1], traced[nw] = id, ARGV[2]
    end
    if endpoint ~= '' then
      if not endpoints then
        err = check_type(KEYS[9], 'hash') or check_type(KEYS[10], 'hash')
        if err then return err end
        endpoints = {[''] = true} -- a flow key without an endpoint names none
        delivers = {}
      end
      -- The endpoint's name, before the timer's own URL (after a space) or
      -- its flow key (after a \0) if it has one.
      local name = match(endpoint, '^[^ %z]*')
      if not endpoints[name] then
        if redis.call('HEXISTS', KEYS[10], name) == 0 then
          return redis.error_reply('TIMERQ_NOENDPOINT ' .. name)
        end
        endpoints[name] = true
      end
      delivers[#delivers + 1] = id
      delivers[#delivers + 1] = endpoint
    end
    local d = number(due)
    if earliest == nil or d < earliest then earliest = d end
    if created then created[id] = k end
    local m = stored_meta and stored_meta[k]
    if due == arg then
      flags[k] = m and 'b' or '1'
    else
      flags[k] = m and 'c' or '2'
      resolved = resolved or {}
      resolved[k] = due
      nextra = nextra + 1
      reply[nextra + 2] = due
    end
    if m then
      nextra = nextra + 1
      reply[nextra + 2] = m
    end
  end
end
reply[2] = n == 1 and flags[1] or table.concat(flags)
if nw == 0 then return reply end
-- The quota, before any write: ZCOUNT of the due times counts the
-- scheduled timers in O(log N) (ZCARD would count layout 2's settled ones
-- too), with a right every role that schedules already has.
local quota = tonumber(ARGV[3])
if quota > 0 then
  err = over_quota('pending', quota, redis.call('ZCOUNT', KEYS[1], '-inf', PENDING_END), nw / 2)
  if err then return err end
end
if trace then
  local _, terr = check_traces()
  if terr then return terr end
end

-- Phase 2: the ACL's rights for every write but the first (HSET of
-- KEYS[2]), whose keys' types phase 1 checked. No write runs before the
-- HSET, so it is the script's first write: Redis applies OOM (HSET may
-- grow memory), READONLY and MISCONF to it, and a refused HSET changes
-- nothing. Only the wake message may have gone out before, which readers
-- treat as a hint (includes/probe.lua).
err = meta_check(metas) or acl_probe('ZADD', KEYS[1]) or (trace and acl_probe('HSET', KEYS[8])) or
  (delivers and acl_probe('HSET', KEYS[9])) or meta_probes(metas) or nil
if err then return err end

-- Phase 3: publish, then write.
if earliest ~= wake_head then
  err = publish(ARGV[1], fmt(earliest))
  if err then return err end
end
local r = redis.pcall('HSET', KEYS[2], unpack(hset)) -- the first write
if type(r) == 'table' and r.err then return refusal(r.err, 'HSET', KEYS[2]) end
redis.call('ZADD', KEYS[1], unpack(zadd))
if trace then redis.call('HSET', KEYS[8], unpack(traced)) end
if delivers then redis.call('HSET', KEYS[9], unpack(delivers)) end
meta_write(metas)
return reply
