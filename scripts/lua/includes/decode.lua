-- decode (include): split a timer record, or nil when it is malformed.
-- includes: is_ms
--
-- decode splits a record, or returns nil when it is malformed: not
-- exactly what encode writes for some state and times in 0..MAX_MS. It is
-- the one validity rule; queue's decodeStored (timer.go) is its mirror,
-- and FuzzQuarantineMatchesDecoder holds the two to the same answer.
local function decode(rec)
  -- A scheduled record, the one a claim reads for every timer it fires,
  -- by a shorter pattern: the general one below, with state s and due and
  -- settled empty.
  local c, p = string.match(rec, '^s::(%d+)::()')
  if c then
    if not is_ms(c) then return nil end
    return 's', '', c, '', string.sub(rec, p)
  end
  local state, due, created, settled, at = string.match(rec, '^([sfc]):(%d*):(%d+):(%d*):()')
  if not state or not is_ms(created) then return nil end
  if state == 's' then
    if due ~= '' or settled ~= '' then return nil end
  elseif not is_ms(due) or not is_ms(settled) then
    return nil
  end
  return state, due, created, settled, string.sub(rec, at)
end
