-- create.lua: write a namespace's meta key unless it exists
-- (queue.CreateNamespace). It runs in the unsharded slot {NS}, so it also
-- sees whether the namespace already holds unsharded data, which a sharded
-- layout would strand.
--
-- KEYS[1] meta: HASH shards, created (keyspace.Namespace.Meta)
-- KEYS[2..] the keys of the one-shard layout that hold timers or schedules
--         (all but counters, which outlive the timers), of layouts 1 and 2
-- ARGV[1] shards
-- Reply: {shards_now, created 0|1}, or an error TIMERQ_INUSE naming a key that
--        holds data when a sharded count was asked for.
-- Complexity: O(1).

local cur = redis.call('HGET', KEYS[1], 'shards')
if cur then return {tonumber(cur), 0} end
if ARGV[1] ~= '1' then
  for i = 2, #KEYS do
    local t = redis.call('TYPE', KEYS[i])
    if type(t) == 'table' then t = t['ok'] end
    if t == 'string' then
      -- Layout 2's marker (upgrade.lua) holds no timer; a later layout's
      -- stops this build.
      local v = redis.pcall('GET', KEYS[i])
      if type(v) == 'table' and v.err then return refusal(v.err, 'GET', KEYS[i], 'read') end
      if not string.find(v, '^timerq%-layout 2') then
        return layout_marker(KEYS[i], t) or redis.error_reply('TIMERQ_INUSE ' .. KEYS[i])
      end
    elseif t ~= 'none' then
      return redis.error_reply('TIMERQ_INUSE ' .. KEYS[i])
    end
  end
end
local now = now_ms()
redis.call('HSET', KEYS[1], 'shards', ARGV[1], 'created', fmt(now))
return {tonumber(ARGV[1]), 1}
