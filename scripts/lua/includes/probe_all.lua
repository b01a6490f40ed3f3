-- probe_all (include): probe a list of {cmd, key} pairs.
-- includes: probe
--
-- probe_all probes each {cmd, key} pair in order, and returns the first
-- refusal's error reply, or nil.
local function probe_all(list)
  for _, w in ipairs(list) do
    local err = probe(w[1], w[2])
    if err then return err end
  end
  return nil
end
