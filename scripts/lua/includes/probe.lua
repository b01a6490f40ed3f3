-- probe (include): run the no-op form of a write command, so that Redis
-- refuses it before the first write.
-- includes: refusal
--
-- Nothing half-done. Redis does not roll a script back: when a command
-- fails, the writes before it stay. And Redis refuses commands inside a
-- script one at a time: ACL rights (the command, its keys, its channel) at
-- every call; OOM, READONLY and MISCONF only at the script's first write
-- command (OOM only if that command may grow memory), never after it. So
-- every script that writes runs in three phases:
--   1. reads and checks: key types, arguments, and every record it will
--      rewrite (a malformed record is an error here, not a Lua error later);
--   2. probes (probe below): each write command it will run, on each key it
--      will write, in a form that changes nothing, so that Redis applies
--      every refusal before anything changed. The first probe decides the
--      OOM policy: cancel and reschedule start with ZADD, which Redis
--      refuses under OOM; claim and purge start with ZREMRANGEBYRANK,
--      which it does not, so timers keep firing and purges free memory.
--      (schedule.lua probes nothing: its first write, an HSET, is run
--      under pcall and Redis refuses it, under OOM too, before it changes
--      anything; the writes after it only ask the ACL, acl_probe);
--   3. the PUBLISHes (a PUBLISH cannot be probed without sending a message),
--      then the writes, none of which Redis can refuse any more.
-- A refusal in phases 1-3 leaves every key untouched. At worst some of the
-- phase 3 messages went out before a later PUBLISH was refused: readers
-- treat a message as a hint to re-read the state, never as the state.

-- Probes are forms of each write command that change nothing. Some succeed
-- as no-ops; the others fail in execution, after Redis checked the rights
-- and the memory, before touching the key, with an error containing the
-- text probe_run returns second. The empty string is never a timer ID (the
-- client rejects it), so it is never a member or field that timerq wrote.
-- probe_run is a chain of calls rather than a table of forms: a script
-- runs its whole body on every call, its includes too, and building a
-- dozen tables each time cost more than most of the commands a claim runs.
local function probe_run(cmd, key)
  if cmd == 'ZADD' then
    return redis.pcall(cmd, key, 'XX', 'GT', '-inf', '') -- XX never adds; GT never lowers to -inf
  elseif cmd == 'HSET' then
    return redis.pcall(cmd, key, '', '', ''), 'wrong number of arguments'
  elseif cmd == 'XADD' then
    -- (not 'XADD key 0-0 ...': miniredis creates the stream before failing)
    return redis.pcall(cmd, key, 'MAXLEN', '-1', '*', '', ''), 'MAXLEN'
  elseif cmd == 'HINCRBY' then
    return redis.pcall(cmd, key, '', 'x'), 'not an integer'
  elseif cmd == 'ZREMRANGEBYRANK' or cmd == 'ZREMRANGEBYSCORE' then
    return redis.pcall(cmd, key, '1', '0') -- an empty range
  elseif cmd == 'ZREM' or cmd == 'HDEL' then
    return redis.pcall(cmd, key, '')
  elseif cmd == 'XTRIM' then
    return redis.pcall(cmd, key, 'MINID', '0') -- no entry is below 0-0
  elseif cmd == 'XDEL' then
    return redis.pcall(cmd, key, '0-0') -- no entry has the ID 0-0
  elseif cmd == 'XACK' then
    return redis.pcall(cmd, key, '', '0-0') -- no group is named ''
  elseif cmd == 'SET' then
    return redis.pcall(cmd, key, '', 'PX', '0'), 'invalid expire time'
  end
  return {err = 'ERR timerq: no probe for ' .. cmd}
end

-- probe runs the no-op form of cmd on key and returns an error reply if
-- Redis refused it, else nil. Any unexpected outcome counts as a refusal:
-- stopping before the first write is always safe.
local function probe(cmd, key)
  local r, want = probe_run(cmd, key)
  local err = type(r) == 'table' and r.err
  if want then
    if err and string.find(err, want, 1, true) then return nil end
    return refusal(err or ('ERR timerq: the ' .. cmd .. ' probe unexpectedly succeeded'), cmd, key)
  end
  if err then return refusal(err, cmd, key) end
  return nil
end
