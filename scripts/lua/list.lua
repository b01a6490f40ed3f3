-- list.lua: one page of timers ordered by (due score, id), optionally one
-- state (a due score may hold microseconds as a fraction: includes/clock_due.lua).
--
-- KEYS: the namespace's seven keys (see includes/check_types.lua), then
--       KEYS[8] the shard's timer meta hash (keyspace TimerMeta)
-- ARGV[1] state: 's', 'f', 'c', or '' for every state
-- ARGV[2] min due score, ARGV[3] max due score (inclusive)
-- ARGV[4] limit (1..1000)
-- ARGV[5] cursor due score and ARGV[6] cursor id: the page starts strictly after
--         them; both empty for the first page
-- Reply: {next_due, next_id, b, bad_id_1, bad_record_1, bad_reason_1,
--        bad_score_1, ...,
--        id_1, record_1, meta_1, ...}; next_* are empty on the last page;
--        meta is the timer's owner, labels and epoch ('' for none). The b
--        records of the page that are malformed (full_or_bad) come apart,
--        raw, so that a listing skips and reports them rather than fails:
--        list only reads, so it cannot quarantine them itself.
-- Complexity: O(log N + limit) per source set, plus the ties at the cursor's
--        due time when the cursor's timer has left that set.
--
-- In layout 2 a settled timer's score is its band's base plus its settle
-- time (includes/layout.lua): a page of fired or cancelled timers runs in
-- settle order, min and max bound the settle time, and its cursor score is
-- the band's, which only this script reads back.

local err = check_types() or check_type(KEYS[8], 'hash')
if err then return err end

local min, max, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local cursor_due, cursor_id = tonumber(ARGV[5]), ARGV[6]
-- Each source is {key, lowest score, highest score}. In layout 2 the
-- three are ranges of KEYS[1]: the due times, and the fired and cancelled
-- bands, where min and max bound the settle time (includes/layout.lua).
local sources
if LAYOUT == 1 then
  sources = {s = {{KEYS[1], min, max}}, f = {{KEYS[3], min, max}}, c = {{KEYS[4], min, max}}}
else
  local function band(lo, top)
    return {KEYS[1], math.max(lo + min, lo), math.min(lo + max, top)}
  end
  sources = {s = {band(0, BAND_FIRED - 1)}, f = {band(BAND_FIRED, BAND_CANCELLED - 1)},
    c = {band(BAND_CANCELLED, 2 * BAND_CANCELLED)}}
  sources.s[1][2] = min
end
sources[''] = {sources.s[1], sources.f[1], sources.c[1]}
local keys = sources[ARGV[1]]

-- Byte order, as sorted sets order members: Lua's '<' uses strcoll, which
-- follows the server's locale.
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local function less(a, b)
  if a[2] ~= b[2] then return a[2] < b[2] end
  return bytes_less(a[1], b[1])
end

-- page returns up to n members of the source's key after the cursor,
-- within the source's scores [lo, hi].
local function page(source, n)
  local key, lo, hi = source[1], source[2], source[3]
  local out = {}
  if cursor_id ~= '' and cursor_due >= lo then
    local score = redis.call('ZSCORE', key, cursor_id)
    if score and tonumber(score) == cursor_due then
      local rank = redis.call('ZRANK', key, cursor_id)
      local r = redis.call('ZRANGE', key, rank + 1, rank + n, 'WITHSCORES')
      for i = 1, #r, 2 do
        local s = tonumber(r[i + 1])
        if s > hi then break end
        out[#out + 1] = {r[i], s}
      end
      return out
    end
  end
  if lo > hi then return out end
  local from = lo
  if cursor_due and cursor_due > from then from = cursor_due end
  local offset = 0
  while #out < n do
    local r = redis.call('ZRANGEBYSCORE', key, from, hi, 'WITHSCORES', 'LIMIT', offset, n)
    if #r == 0 then break end
    for i = 1, #r, 2 do
      local item = {r[i], tonumber(r[i + 1])}
      if cursor_id == '' or less({cursor_id, cursor_due}, item) then
        out[#out + 1] = item
        if #out == n then break end
      end
    end
    offset = offset + #r / 2
  end
  return out
end

local all = {}
for _, source in ipairs(keys) do
  for _, item in ipairs(page(source, limit + 1)) do all[#all + 1] = item end
end
table.sort(all, less)

local reply = {'', '', '0'}
local n = math.min(#all, limit)
if #all > limit then
  reply[1] = fmt_due(all[n][2])
  reply[2] = all[n][1]
end
if n == 0 then return reply end
local ids = {}
for i = 1, n do ids[i] = all[i][1] end
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
local metas = redis.call('HMGET', KEYS[8], unpack(ids))
local good, bad = {}, 0
for i = 1, n do
  if recs[i] then
    local rec, why = full_or_bad(ids[i], recs[i])
    if rec then
      good[#good + 1] = ids[i]
      good[#good + 1] = rec
      good[#good + 1] = metas[i] or ''
    else
      bad = bad + 1
      reply[#reply + 1] = ids[i]
      reply[#reply + 1] = recs[i]
      reply[#reply + 1] = why
      reply[#reply + 1] = fmt_due(all[i][2])
    end
  end
end
reply[3] = fmt(bad)
for _, v in ipairs(good) do reply[#reply + 1] = v end
return reply
