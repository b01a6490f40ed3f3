-- acl_probe (include): probe a write that only the ACL can refuse.
-- includes: probe
--
-- acl_probe is probe for a write whose key's type a read or a TYPE of
-- the same script already checked, and which is not the script's first
-- write probe (that one decides whether Redis applies its OOM policy, and
-- must run: probe), or which comes after a first write whose refusal
-- changes nothing (schedule.lua's HSET). Such a probe's only question is the ACL's, and
-- redis.acl_check_cmd (Redis 7.0 and later, Valkey) answers it without
-- running a command: no reply to parse, no error reply to build. In a
-- one-timer claim a probe costs about 14,000 instructions of Redis and the
-- check about 1,000 (callgrind; BENCHMARKS.md, "Where a claim's
-- instructions go"). Only when the ACL says no, or where the check does
-- not exist (miniredis), the probe runs, so that the refusal names the
-- right it lacks as it always did.
local function acl_probe(cmd, key)
  local check = redis.acl_check_cmd
  if check and check(cmd, key, '', '1', '') then return nil end
  return probe(cmd, key)
end
