-- ns_prefix (include): the namespace's key prefix, from KEYS[1].
--
-- ns_prefix is the namespace's key prefix, 'timerq:{NS}:', for the ACL
-- rules that refusal suggests: the hash tag of KEYS[1], whichever key of
-- the namespace that is.
local function ns_prefix()
  -- A shard of a sharded namespace, timerq:{NS:k}:, suggests the pattern
  -- of every shard, timerq:{NS:*}: (docs/operations.md, "ACL rules").
  local p = string.match(KEYS[1], '^(.-}:)') or KEYS[1]
  return (string.gsub(p, ':%d+}:$', ':*}:'))
end
