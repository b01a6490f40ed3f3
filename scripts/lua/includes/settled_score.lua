-- settled_score (include): where a settled timer sorts.
-- includes: fmt layout pending_end
--
-- settled_score returns the score of a timer settled (state 'f' fired or
-- 'c' cancelled) at settled ms whose due time was due ms (both strings of
-- digits): in layout 1 its due time, in the fired or cancelled set; in
-- layout 2 its settle time in its band of KEYS[1] (includes/layout.lua).
local function settled_score(state, due, settled)
  if LAYOUT == 1 then return due end
  if state == 'c' then return fmt(BAND_CANCELLED + tonumber(settled)) end
  return fmt(BAND_FIRED + tonumber(settled))
end
