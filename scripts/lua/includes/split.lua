-- split (include): the numbers of a comma list.
--
local function split(csv)
  local t = {}
  for n in string.gmatch(csv, '%d+') do t[#t + 1] = n end
  return t
end
