-- recur_arm.lua: top up active schedules with occurrences Go computed, for
-- the materializer after a fire and for the repair pass. Idempotent: an
-- occurrence that exists in any state is never created again, and a plan
-- made from a record that has changed since is refused.
--
-- KEYS: one shard's keys (includes/check_types.lua), then its timer meta
--       hash, owner index and owners' epochs (the occurrences' meta,
--       includes/meta.lua), deliveries, endpoint names, schedules and
--       sched-due (includes/recur_keys.lua).
-- ARGV[1] wake channel, told the new earliest due_ms when it moves earlier
-- ARGV[2..] per schedule: id, version, last_ms (both as read), new_last_ms,
--         new state ('a', or 'e' when nothing follows), payload, endpoint
--         ('' for none: the occurrences' entries in DELIVER_KEY), meta (the
--         occurrences' owner and labels as includes/meta.lua takes them,
--         '' for none), k, then k pairs nominal_ms, due_ms.
-- Reply: {now_ms, status_1, status_2, ...}: 'ok', 'stale' (the record moved
--        on: another worker armed it, or it was updated, paused or ended)
--        or 'gone' (deleted).
-- Complexity: O((a + k) log N) per schedule.
--
-- It runs in the three phases of includes/probe.lua (reads and checks, probes of every
-- write, then the PUBLISH and the writes), so a refused command (ACL, OOM)
-- leaves everything as it was.

recur_keys()
local err = check_recur_types()
if err then return err end

local now = now_ms()
wake_start()

local reply = {fmt(now)}
local plans = {}
local metas = meta_batch(META_KEY, OWNERS_KEY, EPOCHS_KEY)
local i = 2
while i <= #ARGV do
  local sid, version, last, new_last, new_state, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local endpoint, meta = ARGV[i + 6], ARGV[i + 7]
  local k = tonumber(ARGV[i + 8])
  local pairs_at = i + 9
  i = pairs_at + 2 * k
  local rec = redis.call('HGET', SCHED_KEY, sid)
  if not rec then
    reply[#reply + 1] = 'gone'
  else
    local v, st, cnt, rlast, armed, overlap, body = sdecode(rec)
    if fmt(v) ~= version or rlast ~= last or st ~= 'a' then
      reply[#reply + 1] = 'stale'
    else
      local keep, min_due, create = {}, nil, {}
      for _, n in ipairs(split(armed)) do
        local due = redis.call('ZSCORE', KEYS[1], occ_id(sid, n))
        -- (in layout 2 a settled occurrence sorts in a band of KEYS[1])
        if due and tonumber(due) < BAND_FIRED then
          keep[#keep + 1] = n
          due = tonumber(due)
          if min_due == nil or due < min_due then min_due = due end
        end
      end
      for j = 0, k - 1 do
        local n, due = ARGV[pairs_at + 2 * j], ARGV[pairs_at + 2 * j + 1]
        local oid = occ_id(sid, n)
        local score = redis.call('ZSCORE', KEYS[1], oid)
        if score and tonumber(score) < BAND_FIRED then
          local seen = false
          for _, m in ipairs(keep) do if m == n then seen = true end end
          if not seen then keep[#keep + 1] = n end
        elseif not redis.call('HGET', KEYS[2], oid) then
          -- An occurrence without a record has no meta to replace either
          -- (purge.lua drops both together), unlike recur_put's rewrites
          -- and revivals: meta_add's writes are all it needs.
          if meta ~= '' then
            local _, merr = meta_add(metas, oid, due, meta)
            if merr then return merr end
          end
          create[#create + 1] = {oid, due}
          keep[#keep + 1] = n
          local d = tonumber(due)
          if min_due == nil or d < min_due then min_due = d end
          wake_consider(d)
        end
      end
      plans[#plans + 1] = {sid = sid, create = create, payload = payload, endpoint = endpoint,
        rec = sencode(v, new_state, cnt + #create, new_last, table.concat(keep, ','), overlap, body),
        state = new_state, min_due = min_due}
      reply[#reply + 1] = 'ok'
    end
  end
end

-- Phase 2: probes, a ZADD first.
local probes, creates, actives, ends, delivers = {}, false, false, false, false
for _, p in ipairs(plans) do
  if #p.create > 0 then creates = true end
  if #p.create > 0 and p.endpoint ~= '' then delivers = true end
  if p.state == 'a' then actives = true else ends = true end
end
if creates then
  probes[#probes + 1] = {'ZADD', KEYS[1]}
  probes[#probes + 1] = {'HSET', KEYS[2]}
end
if delivers then
  err = check_type(DELIVER_KEY, 'hash')
  if err then return err end
  probes[#probes + 1] = {'HSET', DELIVER_KEY}
end
err = meta_check(metas)
if err then return err end
if actives then probes[#probes + 1] = {'ZADD', SDUE_KEY} end
if #plans > 0 then probes[#probes + 1] = {'HSET', SCHED_KEY} end
if ends then probes[#probes + 1] = {'ZREM', SDUE_KEY} end
err = probe_all(probes) or meta_probes(metas)
if err then return err end

-- Phase 3: publish, then write.
err = wake_publish(ARGV[1])
if err then return err end
local now_s = fmt(now)
for _, p in ipairs(plans) do
  for _, c in ipairs(p.create) do
    redis.call('HSET', KEYS[2], c[1], encode('s', '', now_s, '', p.payload))
    redis.call('ZADD', KEYS[1], c[2], c[1])
    if p.endpoint ~= '' then redis.call('HSET', DELIVER_KEY, c[1], p.endpoint) end
  end
  redis.call('HSET', SCHED_KEY, p.sid, p.rec)
  if p.state == 'a' then
    redis.call('ZADD', SDUE_KEY, fmt(p.min_due or now), p.sid)
  else
    redis.call('ZREM', SDUE_KEY, p.sid)
  end
end
meta_write(metas)
return reply
