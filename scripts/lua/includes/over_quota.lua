-- over_quota (include): refuse a write past a namespace's quota.
-- includes: fmt
--
-- over_quota refuses a call that would take a count of held past quota
-- (queue.Quotas; the caller skips the check for 0, unlimited) by adding
-- more: the error 'TIMERQ_QUOTA <name> <quota> <held> <adding>', which
-- the client turns into a queue.QuotaError. A script calls it before its
-- first write, so that the refused call writes nothing.
local function over_quota(name, quota, held, adding)
  if held + adding > quota then
    return redis.error_reply('TIMERQ_QUOTA ' .. name .. ' ' .. fmt(quota) .. ' ' .. fmt(held) .. ' ' .. fmt(adding))
  end
  return nil
end
