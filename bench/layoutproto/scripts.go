package main

import "strings"

// Claim and schedule scripts of four layouts, each doing the same job
// (fire k due timers: publish each, one fire-stream entry each, counters,
// mark settled; schedule a batch idempotently), to count the instructions
// each layout makes Redis run. Not timerq's scripts: no includes, no error
// shaping; the checks kept are the commands a nothing-half-done script
// must run (a read or TYPE of each key it writes, the first-write probe).

// floor: ../shared/bench/floor-steady's durable claim (records deleted on
// fire, nothing kept, no checks).
const claimFloor = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, 256)
local n = #due / 2
local late = 0
if n > 0 then
  local ids = {}
  for i = 1, n do ids[i] = due[2 * i - 1] end
  local recs = redis.call('HMGET', KEYS[2], unpack(ids))
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
  redis.call('HDEL', KEYS[2], unpack(ids))
  for i = 1, n do
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', '100000', '*', 'id', ids[i], 'due', due[2 * i], 'p', recs[i] or '')
    redis.call('PUBLISH', 'w:' .. ids[i], 'f')
  end
  late = now - tonumber(due[2])
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {n, head[2] or '', late}
`

const schedFloor = `
for i = 1, #ARGV, 3 do
  redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
end
return #ARGV / 3
`

// Shared Lua pieces. bucket: the record bucket of an ID (B buckets).
const luaBucket = `
local function bucket(id, B)
  local h = 0
  for j = 1, #id do h = (h * 31 + string.byte(id, j)) % B end
  return h
end
`

// Fragments the claims and schedules below share, word for word.

// luaClaimHead: the clock, the due timers and the next due time after
// them; a claim with nothing due answers here.
const luaClaimHead = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local nowd = string.format('%d.%03d', now, t[2] % 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', nowd, 'WITHSCORES', 'LIMIT', '0', ARGV[1])
local n = #due / 2
if n == 0 then
  local h = redis.call('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')
  return {nowd, h[2] or ''}
end
local ns = string.format('%d', n)
local head = redis.call('ZRANGE', KEYS[1], ns, ns, 'WITHSCORES')
`

// luaBucketRead groups the due IDs by record bucket and reads each
// bucket's records with one HMGET.
const luaBucketRead = `local B, prefix = tonumber(ARGV[3]), ARGV[4]
local ids, byb, order = {}, {}, {}
for i = 1, n do
  local id = due[2 * i - 1]
  ids[i] = id
  local b = bucket(id, B)
  local g = byb[b]
  if not g then g = {}; byb[b] = g; order[#order + 1] = b end
  g[#g + 1] = i
end
local recs = {}
for _, b in ipairs(order) do
  local g, a = byb[b], {}
  for j = 1, #g do a[j] = ids[g[j]] end
  local r = redis.call('HMGET', prefix .. b, unpack(a))
  for j = 1, #g do recs[g[j]] = r[j] end
end
`

// luaBucketWrite writes each bucket's settled records with one HSET.
const luaBucketWrite = `for _, b in ipairs(order) do
  local g, a = byb[b], {}
  for j = 1, #g do a[2 * j - 1], a[2 * j] = ids[g[j]], recs[g[j]] end
  redis.call('HSET', prefix .. b, unpack(a))
end
`

// luaCreated36 is now_ms in base 36, a compact record's created time.
const luaCreated36 = `local created = ''
local x = now
repeat local d = x % 36; created = string.sub('0123456789abcdefghijklmnopqrstuvwxyz', d + 1, d + 1) .. created; x = math.floor(x / 36) until x == 0
`

// luaSchedBucketHead and luaSchedBucketTail are a bucketed schedule but
// its quota count: the clock, the head, the idempotency reads by bucket;
// then the records by bucket and the due set.
const luaSchedBucketHead = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local B, prefix = tonumber(ARGV[1]), ARGV[2]
local byb, order = {}, {}
for i = 3, #ARGV, 3 do
  local b = bucket(ARGV[i], B)
  local g = byb[b]
  if not g then g = {}; byb[b] = g; order[#order + 1] = b end
  g[#g + 1] = i
end
for _, b in ipairs(order) do
  local g, a = byb[b], {}
  for j = 1, #g do a[j] = ARGV[g[j]] end
  redis.call('HMGET', prefix .. b, unpack(a))
end
`

const luaSchedBucketTail = `for _, b in ipairs(order) do
  local g, a = byb[b], {}
  for j = 1, #g do a[2 * j - 1], a[2 * j] = ARGV[g[j]], 's' .. created .. ':' .. ARGV[g[j] + 2] end
  redis.call('HSET', prefix .. b, unpack(a))
end
local zs = {}
for i = 3, #ARGV, 3 do zs[#zs + 1] = ARGV[i + 1]; zs[#zs + 1] = ARGV[i] end
redis.call('ZADD', KEYS[1], unpack(zs))
return #zs / 2
`

// v1: layout 1's keys (due, timers, fired, expire, fires, counters) and
// a claim's commands, with one EXISTS of the traces and deliveries hashes
// and the counters read and written once (HMGET + HSET; the real scripts
// keep TYPE + HINCRBY each, which their Lua makes cheaper there). A fired
// record is rewritten in place.
const claimV1 = luaClaimHead +
	`local ids = {}
for i = 1, n do ids[i] = due[2 * i - 1] end
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
redis.call('TYPE', KEYS[5])
local c = redis.call('HMGET', KEYS[6], 'fired', 'late_sum_ms', 'late_le_5')
redis.call('EXISTS', KEYS[7], KEYS[8])
redis.call('ZREMRANGEBYRANK', KEYS[1], '1', '0')
redis.call('ZADD', KEYS[3], 'XX', 'GT', '-inf', '')
redis.call('ZADD', KEYS[4], 'XX', 'GT', '-inf', '')
for i = 1, n do redis.call('PUBLISH', ARGV[2] .. ids[i], 'fired') end
redis.call('ZREMRANGEBYRANK', KEYS[1], '0', string.format('%d', n - 1))
local nows = string.format('%d', now)
local purge = string.format('%d', now + 604800000)
local late = 0
local hs, zf, ze = {}, {}, {}
for i = 1, n do
  local id, rec = ids[i], recs[i]
  local created, payload = string.match(rec, '^s::([^:]*)::(.*)$')
  local dms = math.floor(tonumber(due[2 * i]))
  late = late + now - dms
  local ds = string.format('%d', dms)
  redis.call('XADD', KEYS[5], '*', 'id', id, 'due', ds, 'fired', nows, 'payload', payload)
  hs[2 * i - 1], hs[2 * i] = id, 'f:' .. ds .. ':' .. created .. ':' .. nows .. ':' .. payload
  zf[2 * i - 1], zf[2 * i] = ds, id
  ze[2 * i - 1], ze[2 * i] = purge, id
end
redis.call('HSET', KEYS[2], unpack(hs))
redis.call('ZADD', KEYS[3], unpack(zf))
redis.call('ZADD', KEYS[4], unpack(ze))
redis.call('HSET', KEYS[6], 'fired', string.format('%d', (tonumber(c[1]) or 0) + n),
  'late_sum_ms', string.format('%d', (tonumber(c[2]) or 0) + late),
  'late_le_5', string.format('%d', (tonumber(c[3]) or 0) + n))
return {nowd, head[2] or '', n}
`

const schedV1 = `
local t = redis.call('TIME')
local now = string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000))
local shards = redis.call('HGET', KEYS[7], 'shards')
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local ids = {}
for i = 1, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
local held = redis.call('ZCOUNT', KEYS[1], '-inf', '+inf')
local hs, zs = {}, {}
for i = 1, #ARGV, 3 do
  hs[#hs + 1] = ARGV[i]; hs[#hs + 1] = 's::' .. now .. '::' .. ARGV[i + 2]
  zs[#zs + 1] = ARGV[i + 1]; zs[#zs + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], unpack(hs))
redis.call('ZADD', KEYS[1], unpack(zs))
return #ids
`

// doc: docs/layout-v2.md as designed: pending, settled, records in ID
// buckets rec:<b>, counters hash, fires.
const claimDoc = luaBucket +
	luaClaimHead +
	luaBucketRead +
	`redis.call('TYPE', KEYS[3])
local c = redis.call('HMGET', KEYS[4], 'fired', 'late_sum_ms', 'late_le_5')
redis.call('ZREMRANGEBYRANK', KEYS[1], '1', '0')
redis.call('ZADD', KEYS[2], 'XX', 'GT', '-inf', '')
for i = 1, n do redis.call('PUBLISH', ARGV[2] .. ids[i], 'fired') end
redis.call('ZREMRANGEBYRANK', KEYS[1], '0', string.format('%d', n - 1))
local nows = string.format('%d', now)
local purge = string.format('%d', now + 604800000)
local late = 0
local zs = {}
for i = 1, n do
  local id, rec = ids[i], recs[i]
  local created, payload = string.match(rec, '^s([^:]*):(.*)$')
  local dms = math.floor(tonumber(due[2 * i]))
  late = late + now - dms
  local ds = string.format('%d', dms)
  redis.call('XADD', KEYS[3], '*', 'id', id, 'due', ds, 'fired', nows, 'payload', payload)
  recs[i] = 'f' .. ds .. ':' .. created .. ':' .. nows .. ':' .. payload
  zs[2 * i - 1], zs[2 * i] = purge, id
end
` +
	luaBucketWrite +
	`redis.call('ZADD', KEYS[2], unpack(zs))
redis.call('HSET', KEYS[4], 'fired', string.format('%d', (tonumber(c[1]) or 0) + n),
  'late_sum_ms', string.format('%d', (tonumber(c[2]) or 0) + late),
  'late_le_5', string.format('%d', (tonumber(c[3]) or 0) + n))
return {nowd, head[2] or '', n}
`

const schedDoc = luaBucket +
	luaSchedBucketHead +
	`local held = redis.call('ZCARD', KEYS[1])
` +
	luaCreated36 +
	luaSchedBucketTail

// bands: one zset holds pending timers at their due score and settled
// ones in a band above every due time (1e15 + settle ms: exact in a
// double); the counters are fields of the records hash, read in the
// claim's one HMGET and written in its one HSET. Nothing to probe but the
// first write (the zset's and the hash's types are checked by the reads).
const claimBands = luaClaimHead +
	`local ids, m = {}, n
for i = 1, n do ids[i] = due[2 * i - 1] end
ids[n + 1], ids[n + 2], ids[n + 3] = '#fired', '#late_sum_ms', '#late_le_5'
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
redis.call('TYPE', KEYS[3])
redis.call('ZREMRANGEBYRANK', KEYS[1], '1', '0')
for i = 1, n do redis.call('PUBLISH', ARGV[2] .. ids[i], 'fired') end
local nows = string.format('%d', now)
local band = string.format('%d', 1e15 + now)
local late = 0
local zs, hs = {}, {}
for i = 1, n do
  local id, rec = ids[i], recs[i]
  local created, payload = string.match(rec, '^s([^:]*):(.*)$')
  local dms = math.floor(tonumber(due[2 * i]))
  late = late + now - dms
  local ds = string.format('%d', dms)
  redis.call('XADD', KEYS[3], '*', 'id', id, 'due', ds, 'fired', nows, 'payload', payload)
  hs[2 * i - 1], hs[2 * i] = id, 'f' .. ds .. ':' .. created .. ':' .. nows .. ':' .. payload
  zs[2 * i - 1], zs[2 * i] = band, id
end
redis.call('ZADD', KEYS[1], unpack(zs))
hs[2 * n + 1], hs[2 * n + 2] = '#fired', string.format('%d', (tonumber(recs[n + 1]) or 0) + n)
hs[2 * n + 3], hs[2 * n + 4] = '#late_sum_ms', string.format('%d', (tonumber(recs[n + 2]) or 0) + late)
hs[2 * n + 5], hs[2 * n + 6] = '#late_le_5', string.format('%d', (tonumber(recs[n + 3]) or 0) + n)
redis.call('HSET', KEYS[2], unpack(hs))
return {nowd, head[2] or '', n}
`

const schedBands = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local ids = {}
for i = 1, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
redis.call('HMGET', KEYS[2], unpack(ids))
local held = redis.call('ZCOUNT', KEYS[1], '-inf', '(1e15')
` +
	luaCreated36 +
	`local hs, zs = {}, {}
for i = 1, #ARGV, 3 do
  hs[#hs + 1] = ARGV[i]; hs[#hs + 1] = 's' .. created .. ':' .. ARGV[i + 2]
  zs[#zs + 1] = ARGV[i + 1]; zs[#zs + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], unpack(hs))
redis.call('ZADD', KEYS[1], unpack(zs))
return #ids
`

// bandsb: bands, with the records in ID buckets (for memory) and the
// counters in their own hash (read by HMGET, written by one HSET).
const claimBandsB = luaBucket +
	luaClaimHead +
	luaBucketRead +
	`redis.call('TYPE', KEYS[3])
local c = redis.call('HMGET', KEYS[4], 'fired', 'late_sum_ms', 'late_le_5')
redis.call('ZREMRANGEBYRANK', KEYS[1], '1', '0')
for i = 1, n do redis.call('PUBLISH', ARGV[2] .. ids[i], 'fired') end
local nows = string.format('%d', now)
local band = string.format('%d', 1e15 + now)
local late = 0
local zs = {}
for i = 1, n do
  local id, rec = ids[i], recs[i]
  local created, payload = string.match(rec, '^s([^:]*):(.*)$')
  local dms = math.floor(tonumber(due[2 * i]))
  late = late + now - dms
  local ds = string.format('%d', dms)
  redis.call('XADD', KEYS[3], '*', 'id', id, 'due', ds, 'fired', nows, 'payload', payload)
  recs[i] = 'f' .. ds .. ':' .. created .. ':' .. nows .. ':' .. payload
  zs[2 * i - 1], zs[2 * i] = band, id
end
redis.call('ZADD', KEYS[1], unpack(zs))
` +
	luaBucketWrite +
	`redis.call('HSET', KEYS[4], 'fired', string.format('%d', (tonumber(c[1]) or 0) + n),
  'late_sum_ms', string.format('%d', (tonumber(c[2]) or 0) + late),
  'late_le_5', string.format('%d', (tonumber(c[3]) or 0) + n))
return {nowd, head[2] or '', n}
`

const schedBandsB = luaBucket +
	luaSchedBucketHead +
	`local held = redis.call('ZCOUNT', KEYS[1], '-inf', '(1e15')
` +
	luaCreated36 +
	luaSchedBucketTail

// bandsc: bandsb with a bucket function of two bytes (to tell the hash's
// cost from the bucket commands').
var claimBandsC = strings.Replace(claimBandsB, luaBucket, luaBucketCheap, 1)
var schedBandsC = strings.Replace(schedBandsB, luaBucket, luaBucketCheap, 1)

const luaBucketCheap = `
local function bucket(id, B)
  local a, b = string.byte(id, -2, -1)
  return (a * 256 + b) % B
end
`
