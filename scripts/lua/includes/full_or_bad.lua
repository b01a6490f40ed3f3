-- full_or_bad (include): full, or why the record cannot be read (reads
-- KEYS[1]).
-- includes: decode due_of
--
-- full_or_bad is full for a record that decode accepts and whose due time
-- (if scheduled) is valid; for any other it returns nil and why, so that a
-- reader skips and reports the record instead of failing.
local function full_or_bad(id, rec)
  local state = decode(rec)
  if not state then return nil, 'malformed record' end
  if state == 's' then
    local due = due_of(id)
    if not due then return nil, 'scheduled record without a valid due time' end
    return 's:' .. due .. string.sub(rec, 3)
  end
  return rec
end
