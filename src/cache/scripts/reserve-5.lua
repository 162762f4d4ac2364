--[[
  reserve: claim the right to forward one message ID to one target address.

  KEYS[1] ids        ZSET  id -> commit sequence (the circular cache)
  KEYS[2] at         HASH  id -> commit time (ms, Redis clock)
  KEYS[3] res        HASH  id -> "token|expiry|possibleDuplicate"
  KEYS[4] res-exp    ZSET  id -> reservation expiry (ms)
  KEYS[5] uncertain  ZSET  id -> marker expiry (ms): the ID's last send had an unknown outcome

  ARGV[1] id
  ARGV[2] owner token (non-empty; one delivery of one message in one process)
  (ARGV[3..7] as below; then optionally more id, token pairs from ARGV[8] on: one call reserves many IDs of one
  address, each exactly as if reserved alone, in order)
  ARGV[3] lease (ms)
  ARGV[4] id-cache-ttl (ms, 0 = none)
  ARGV[5] marker retention (ms): how long an uncertain marker (or an abandoned reservation) is remembered
  ARGV[6] most markers kept per address (the oldest beyond it are dropped)
  ARGV[7] cleanup batch: most expired entries removed per ID asked for (bounded work)

  Returns a pair per ID, in order, flattened: {code1, pd1, code2, pd2, ...}
  1, pd    RESERVED    the caller holds the reservation; pd = 1 when the ID may already be at the target
  2, 0     DUPLICATE   the ID is recorded (and not expired)
  3, 0     BUSY        another owner holds a live reservation
  or {9, msg}  BAD_ARGUMENT (for the whole call)

  A replay (same token) answers what the first call answered: the possible-duplicate flag is stored with the
  reservation. An expired reservation of another owner is taken over with pd = 1 (its owner may have sent it).
]]
local lease, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local retention, maxMarkers, batch = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if not (lease and lease > 0 and ttl and ttl >= 0 and retention and retention > 0 and maxMarkers and batch) then
  return {9, 'bad numbers'}
end
local items = {{ARGV[1], ARGV[2]}}
for i = 8, #ARGV - 1, 2 do items[#items + 1] = {ARGV[i], ARGV[i + 1]} end
local asked = {}
for _, it in ipairs(items) do
  if it[2] == nil or it[2] == '' then return {9, 'empty token'} end
  asked[it[1]] = true
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Housekeeping work grows with the IDs asked for, as if each had been reserved by a call of its own.
local limit = batch * #items

-- Bounded housekeeping, so that reservations never committed or released cannot pile up. An abandoned
-- reservation becomes an uncertain marker: its owner may have sent the message before vanishing.
-- (IDs asked for in this call are left to the checks below.)
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, limit)
for _, e in ipairs(expired) do
  if not asked[e] then
    redis.call('HDEL', KEYS[3], e)
    redis.call('ZREM', KEYS[4], e)
    redis.call('ZADD', KEYS[5], now + retention, e)
  end
end
if #expired > 0 then redis.call('PEXPIRE', KEYS[5], retention) end
local old = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, limit)
for _, o in ipairs(old) do redis.call('ZREM', KEYS[5], o) end
local excess = redis.call('ZCARD', KEYS[5]) - maxMarkers
if excess > 0 then redis.call('ZPOPMIN', KEYS[5], excess) end
if ttl > 0 then
  -- Sequence order is commit order, so the oldest entries come first; stop at the first one still young.
  local oldest = redis.call('ZRANGE', KEYS[1], 0, batch - 1)
  for _, o in ipairs(oldest) do
    local at = tonumber(redis.call('HGET', KEYS[2], o))
    if at and now - at < ttl then break end
    redis.call('ZREM', KEYS[1], o)
    redis.call('HDEL', KEYS[2], o)
  end
end

-- Markers are rare: when there are none, skip looking for them per ID.
local markers = redis.call('ZCARD', KEYS[5]) > 0

local function reserve(id, token)
  -- Recorded?
  if redis.call('ZSCORE', KEYS[1], id) then
    local live = true
    if ttl > 0 then
      local at = tonumber(redis.call('HGET', KEYS[2], id))
      if not at or now - at >= ttl then
        live = false
        redis.call('ZREM', KEYS[1], id)
        redis.call('HDEL', KEYS[2], id)
      end
    end
    if live then return 2, 0 end
  end

  -- Reserved?
  local pd = 0
  local cur = redis.call('HGET', KEYS[3], id)
  if cur then
    local owner, exp, flag = string.match(cur, '^(.*)|(%d+)|([01])$')
    if owner == token then return 1, tonumber(flag) end
    if exp and tonumber(exp) > now then return 3, 0 end
    pd = 1
  elseif markers then
    local marker = redis.call('ZSCORE', KEYS[5], id)
    if marker and tonumber(marker) > now then pd = 1 end
  end

  -- The flag now lives with the reservation; a release keeps it (see release-3.lua), a commit ends it.
  if markers then redis.call('ZREM', KEYS[5], id) end
  local expiry = now + lease
  redis.call('HSET', KEYS[3], id, token .. '|' .. string.format('%.0f', expiry) .. '|' .. pd)
  redis.call('ZADD', KEYS[4], expiry, id)
  return 1, pd
end

local out = {}
for _, it in ipairs(items) do
  local code, pd = reserve(it[1], it[2])
  out[#out + 1] = code
  out[#out + 1] = pd
end
-- If the address goes quiet, its reservation keys vanish once every entry would have been forgotten anyway.
redis.call('PEXPIRE', KEYS[3], lease + retention)
redis.call('PEXPIRE', KEYS[4], lease + retention)
return out
