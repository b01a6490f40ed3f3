-- full (include): a scheduled record with its due time filled in (reads
-- KEYS[1]).
-- includes: due_of
--
-- full fills in the due time of a scheduled record for a reply. A scheduled
-- record without a due time is returned as it is, which the client reports
-- as malformed.
local function full(id, rec)
  if string.sub(rec, 1, 3) ~= 's::' then return rec end
  local due = due_of(id)
  if not due then return rec end
  return 's:' .. due .. string.sub(rec, 3)
end
