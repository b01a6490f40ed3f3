-- cancel_batch.lua: one step of a bulk cancel on one shard: scan the next
-- batch of the shard's timers whose IDs match a pattern, cancel the
-- scheduled ones, and record the step in the job's progress on the shard.
--
-- The scan cursor lives in the progress hash and moves in the same atomic
-- step as the cancels it led to, so a job resumed by another worker, or
-- run by two at once, neither skips nor repeats a batch, and its counts
-- are exact. A timer settled (fired, cancelled) before the step is counted
-- as it stands and left alone: each matching timer ends cancelled or
-- fired, never both.
--
-- KEYS: the namespace's seven keys (see includes/check_types.lua), then
--   KEYS[8] the job's progress on this shard (HASH): cursor (the HSCAN
--           cursor of the next step, absent = start), done ('1' once the
--           scan came back to cursor 0), and the counts cancelled, fired,
--           already (cancelled before the job reached them) and skipped
--           (records timerq did not write, left alone).
-- ARGV[1] the HSCAN MATCH pattern: the escaped ID prefix, then '*'
-- ARGV[2] the HSCAN COUNT: how many of the hash's entries a step visits
-- ARGV[3] retention_ms of the cancelled records; 0 = forever
-- KEYS[9] the shard's timer meta hash, KEYS[10] its owners index
--         (keyspace TimerMeta, Owners)
-- ARGV[4] the prefix of the timers' wakeup channels (the ID follows)
-- ARGV[5] owner: '' for any; else a step reads the owner's next COUNT
--         timers from the owners index, and the cursor is the last member
--         it read
-- ARGV[6] labels the timers must carry: '\31<key>=<value>' each, '' for
--         none; without an owner, a step scans the meta hash instead of
--         the records
-- ARGV[7] epoch: '' for any; else only timers of an owner epoch below it
-- ARGV[8] the ID prefix itself ('' for none), which the owner index's
--         steps compare (the scans use ARGV[1])
-- Reply: {done, cancelled, fired, already, skipped}: done 1 when the
--        shard's scan is over (now or before), and this step's counts.
-- Complexity: O(COUNT) for the scan (more when the hash's buckets are
--        long), plus O(log N) per timer cancelled.

local err = check_types()
if err then return err end
err = check_type(KEYS[8], 'hash')
if err then return err end

-- Phase 1: read and check.
local p = redis.call('HMGET', KEYS[8], 'cursor', 'done', 'cancelled', 'fired', 'already', 'skipped')
if p[2] == '1' then return {1, 0, 0, 0, 0} end
local owner, labels, below, prefix = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]
local cursor, found
if owner == '' and labels == '' then
  local scan = redis.call('HSCAN', KEYS[2], p[1] or '0', 'MATCH', ARGV[1], 'COUNT', ARGV[2])
  cursor, found = scan[1], scan[2]
else
  err = check_type(KEYS[9], 'hash') or check_type(KEYS[10], 'zset')
  if err then return err end
  -- ids and their metas, from the owner index or the meta hash.
  local ids, metas = {}, nil
  if owner ~= '' then
    local count = tonumber(ARGV[2])
    local members = redis.call('ZRANGEBYLEX', KEYS[10], p[1] or ('[' .. owner .. '\0'), '(' .. owner .. '\1',
      'LIMIT', '0', ARGV[2])
    local skip = #owner + 2
    for i, m in ipairs(members) do ids[i] = string.sub(m, skip) end
    cursor = '0'
    if #members == count then cursor = '(' .. members[#members] end
    if #ids > 0 then metas = redis.call('HMGET', KEYS[9], unpack(ids)) end
  else
    local scan = redis.call('HSCAN', KEYS[9], p[1] or '0', 'MATCH', ARGV[1], 'COUNT', ARGV[2])
    cursor = scan[1]
    metas = {}
    for i = 1, #scan[2], 2 do
      ids[#ids + 1] = scan[2][i]
      metas[#metas + 1] = scan[2][i + 1]
    end
  end
  -- Keep the timers the filter selects: the prefix, every label, the
  -- epoch (meta: '<epoch>\31<deadline>\31<owner>\31<key>=<value>...').
  local keep = {}
  for i, id in ipairs(ids) do
    local m = metas[i]
    local ok = m and string.sub(id, 1, #prefix) == prefix
    -- An index entry whose timer's meta names another owner is not the
    -- owner's: recur_put.lua once left one behind when it re-armed an
    -- occurrence under a new owner (it now removes it), and such entries
    -- stay in a namespace written before.
    if ok and owner ~= '' then ok = string.match(m, '^[^\31]*\31[^\31]*\31([^\31]*)') == owner end
    if ok and below then ok = (tonumber(string.match(m, '^%d+')) or 0) < below end
    if ok and labels ~= '' then
      local have = string.match(m, '^[^\31]*\31[^\31]*\31[^\31]*(.*)$') .. '\31'
      for kv in string.gmatch(labels, '\31[^\31]*') do
        if not string.find(have, kv .. '\31', 1, true) then
          ok = false
          break
        end
      end
    end
    if ok then keep[#keep + 1] = id end
  end
  found = {}
  if #keep > 0 then
    local recs = redis.call('HMGET', KEYS[2], unpack(keep))
    for i, id in ipairs(keep) do
      -- A purged timer's entries go with it; a record missing here was
      -- never the filter's.
      if recs[i] then
        found[#found + 1] = id
        found[#found + 1] = recs[i]
      end
    end
  end
end
local todo = {}
local fired, already, skipped = 0, 0, 0
for i = 1, #found, 2 do
  local id = found[i]
  local state, _, created, _, payload = decode(found[i + 1])
  local due = state == 's' and due_of(id)
  if state == 'f' then
    fired = fired + 1
  elseif state == 'c' then
    already = already + 1
  elseif not due then
    skipped = skipped + 1 -- malformed, or scheduled without a due time
  else
    todo[#todo + 1] = {id, due, created, payload}
  end
end
local retention = tonumber(ARGV[3])
local now = #todo > 0 and now_ms()

-- Phase 2: probes (cancel_probes first: ZADD, so that Redis refuses a
-- bulk cancel under OOM), then the progress hash.
local probes = {}
if #todo > 0 then probes = cancel_probes(probes, retention) end
probes[#probes + 1] = {'HSET', KEYS[8]}
err = probe_all(probes)
if err then return err end

-- Phase 3: publish, then write.
for _, t in ipairs(todo) do
  err = cancel_publish(ARGV[4] .. t[1])
  if err then return err end
end
for _, t in ipairs(todo) do
  cancel_timer(t[1], t[2], t[3], t[4], now, retention)
end
local done = 0
if cursor == '0' then done = 1 end
redis.call('HSET', KEYS[8], 'cursor', cursor, 'done', done,
  'cancelled', (tonumber(p[3]) or 0) + #todo, 'fired', (tonumber(p[4]) or 0) + fired,
  'already', (tonumber(p[5]) or 0) + already, 'skipped', (tonumber(p[6]) or 0) + skipped)
return {done, #todo, fired, already, skipped}
