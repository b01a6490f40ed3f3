-- occ_id (include): an occurrence's timer ID.
--
local function occ_id(sid, nominal)
  return sid .. '@' .. nominal
end
