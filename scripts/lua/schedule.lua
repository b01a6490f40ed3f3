-- schedule.lua: create timers that do not exist yet; leave existing ones alone.
--
-- KEYS: the namespace's seven keys, then its traces hash (see prelude.lua),
--       then KEYS[9] the shard's deliveries hash (id -> endpoint name) and
--       KEYS[10] the shard's endpoint names hash (keyspace EndpointNames:
--       with one shard, the namespace's endpoints hash itself)
-- ARGV[1]        wake channel, told the new earliest due_ms when it moves earlier
-- ARGV[2]        traceparent of the scheduling span, kept in KEYS[8] for each
--                timer created, so the fire continues its trace; '' for none
-- ARGV[3+4i..]   quadruples: id, due, payload, endpoint (validated by the
--                client); due is due_ms, or '+<ms>.<us>' for that long after
--                the server's clock (see resolve_due in prelude.lua);
--                endpoint is the name of the endpoint the fire is delivered
--                to, '' for a timer that does not deliver; with a flow key
--                it is "<endpoint>\0<flow key>" (the endpoint may be ''),
--                stored as is, which claim.lua splits into the fields
--                endpoint and flow
-- Reply: {now_ms, created_1, record_1, created_2, record_2, ...}; created is
--        1 for a new timer and 0 when the ID already existed in any state.
--        A new delivering timer whose endpoint KEYS[10] does not name is
--        refused: the error 'TIMERQ_NOENDPOINT <name>', and nothing written.
-- Complexity: O(k log N) for k timers in a set of N (plus one HSET of k
--        fields when traced, and one HEXISTS per distinct endpoint and one
--        HSET of the delivering timers when some deliver).
--
-- Idempotent by ID: an existing record, even fired or cancelled, is returned
-- unchanged, so a replaying caller never re-arms a timer that already fired.
-- All or nothing: it checks and probes before its first write (prelude.lua),
-- so a refusal (ACL, OOM) creates none of the timers.

local err = check_types()
if err then return err end

local now = fmt(now_ms())
wake_start()

-- Phase 1: read every record and check every argument.
local ids = {}
for i = 3, #ARGV, 4 do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then return {now} end
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
local reply = {now}
local hset, zadd, created, traced, delivers = {}, {}, {}, {}, {}
local endpoints = {} -- name -> true once checked
local trace = ARGV[2] ~= ''
for k, id in ipairs(ids) do
  local due, payload, endpoint = ARGV[4 * k], ARGV[4 * k + 1], ARGV[4 * k + 2]
  local rec = recs[k]
  if rec then
    local state = decode(rec)
    if not state then return malformed(id, 'has a malformed record') end
    if state == 's' and not due_of(id) then
      return malformed(id, 'is scheduled but has no due time in ' .. KEYS[1])
    end
    reply[#reply + 1] = 0
    reply[#reply + 1] = full(id, rec)
  elseif created[id] then
    -- A repeated ID within the call: created once, by its first occurrence.
    reply[#reply + 1] = 0
    reply[#reply + 1] = created[id]
  else
    due = resolve_due(due)
    if not string.match(due, '^%d+$') then
      return redis.error_reply('ERR timerq: due time "' .. due .. '" of timer "' .. id ..
        '" is not a count of milliseconds')
    end
    hset[#hset + 1] = id
    hset[#hset + 1] = encode('s', '', now, '', payload)
    zadd[#zadd + 1] = due
    zadd[#zadd + 1] = id
    if trace then
      traced[#traced + 1] = id
      traced[#traced + 1] = ARGV[2]
    end
    -- "<endpoint>\0<flow key>" when the timer has a flow key: only the
    -- endpoint part names an endpoint, and the whole value is stored.
    if endpoint ~= '' then
      local name = string.match(endpoint, '^[^%z]*')
      if next(endpoints) == nil then
        err = check_type(KEYS[9], 'hash') or check_type(KEYS[10], 'hash')
        if err then return err end
      end
      if name ~= '' and not endpoints[name] then
        if redis.call('HEXISTS', KEYS[10], name) == 0 then
          return redis.error_reply('TIMERQ_NOENDPOINT ' .. name)
        end
        endpoints[name] = true
      end
      endpoints[''] = true
      delivers[#delivers + 1] = id
      delivers[#delivers + 1] = endpoint
    end
    wake_consider(due)
    created[id] = encode('s', due, now, '', payload)
    reply[#reply + 1] = 1
    reply[#reply + 1] = created[id]
  end
end
if #hset == 0 then return reply end
if trace then
  local _, terr = check_traces()
  if terr then return terr end
end

-- Phase 2: probes; ZADD first, so that Redis refuses a schedule under OOM.
local probes = {{'ZADD', KEYS[1]}, {'HSET', KEYS[2]}}
if trace then probes[#probes + 1] = {'HSET', KEYS[8]} end
if #delivers > 0 then probes[#probes + 1] = {'HSET', KEYS[9]} end
err = probe_all(probes)
if err then return err end

-- Phase 3: publish, then write.
err = wake_publish(ARGV[1])
if err then return err end
redis.call('HSET', KEYS[2], unpack(hset))
redis.call('ZADD', KEYS[1], unpack(zadd))
if trace then redis.call('HSET', KEYS[8], unpack(traced)) end
if #delivers > 0 then redis.call('HSET', KEYS[9], unpack(delivers)) end
return reply
