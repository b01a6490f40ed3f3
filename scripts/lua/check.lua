-- check.lua: check, changing nothing, that this Redis user may run what a
-- worker's scripts run (those the table in scripts.go marks Worker: claim,
-- purge, stats, heartbeat, the recurring ones): each command on each key it
-- touches, and PUBLISH on the namespace's channels. scripts_test.go holds it
-- to the table.
-- Workers run it at start-up, so that a missing right is reported at once,
-- by name, rather than at the first due timer. It probes nothing a worker
-- does not run (list.lua's ZRANK is timerctl's), so that docs/security.md's
-- worker line, which grants exactly what a worker needs, passes it.
--
-- KEYS: the namespace's seven keys (see includes/check_types.lua).
-- ARGV[1] a timer channel to publish 'probe' on: that of the empty ID, on
--         which no one can wait (the empty ID is invalid)
-- ARGV[2] the wake channel, to publish 'probe' on (pollers ignore a wake
--         message that is not a number)
-- Reply: 'ok', or the error reply of the first refusal (see includes/check_types.lua).
-- Complexity: O(log N).

local reads = {}
for i = 1, #KEYS do reads[#reads + 1] = {'TYPE', KEYS[i]} end
for _, r in ipairs({
  {'TIME'},
  {'ZRANGE', KEYS[1], 0, 0, 'WITHSCORES'},
  {'ZRANGEBYSCORE', KEYS[1], '-inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1},
  {'ZRANGEBYSCORE', KEYS[5], '-inf', '-inf', 'LIMIT', 0, 1},
  {'ZSCORE', KEYS[1], ''}, {'ZCOUNT', KEYS[5], '-inf', '-inf'},
  {'ZCARD', KEYS[1]}, {'ZCARD', KEYS[3]}, {'ZCARD', KEYS[4]},
  {'HGET', KEYS[2], ''}, {'HMGET', KEYS[2], ''},
}) do reads[#reads + 1] = r end
for _, r in ipairs(reads) do
  local res = redis.pcall(unpack(r))
  if type(res) == 'table' and res.err then
    -- A key of another type (a later layout's marker, say): check_types
    -- names it.
    if string.find(res.err, 'WRONGTYPE', 1, true) then return check_types() or redis.error_reply(res.err) end
    return refusal(res.err, r[1], r[2] or '', 'read')
  end
end

local err = check_types()
if err then return err end

-- ZREMRANGEBYRANK first, as in claim.lua: a full Redis passes the check,
-- since claims and purges still run under OOM.
err = probe_all({
  {'ZREMRANGEBYRANK', KEYS[1]}, {'ZREMRANGEBYRANK', KEYS[5]},
  -- heartbeat.lua's, on the workers set, also a sorted set.
  {'ZREMRANGEBYSCORE', KEYS[1]},
  {'ZADD', KEYS[1]}, {'ZADD', KEYS[3]}, {'ZADD', KEYS[4]}, {'ZADD', KEYS[5]},
  {'ZREM', KEYS[1]}, {'ZREM', KEYS[3]}, {'ZREM', KEYS[4]},
  {'HSET', KEYS[2]}, {'HDEL', KEYS[2]},
  {'XADD', KEYS[6]}, {'XTRIM', KEYS[6]},
  {'HINCRBY', KEYS[7]},
})
if err then return err end

err = publish(ARGV[1], 'probe')
if err then return err end
err = publish(ARGV[2], 'probe')
if err then return err end
return 'ok'
