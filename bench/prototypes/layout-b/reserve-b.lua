-- A PROTOTYPE (bench/prototypes/layout-b/compare.ts), not the product: layout B reserve. One hash `st` per address:
-- id -> "c<time>" (recorded) or "r<token>|<expiry>|<pd>" (reserved); the ZSET `ids` (commit order); uncertain markers
-- as today. Expired reservations are found by a bounded HSCAN (2 entries per ID asked for) instead of a sorted set.
-- KEYS: st, ids, uncertain, cursor   ARGV: lease, ttl (unused), retention, maxMarkers, all id/token pairs packed
local lease, ttl, retention, maxMarkers = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ok, count, ids, tokens = pcall(cmsgpack.unpack, ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- housekeeping: scan 2 entries per ID asked for
local cur = redis.call('GET', KEYS[4]) or '0'
local scan = redis.call('HSCAN', KEYS[1], cur, 'COUNT', 2 * #ids)
redis.call('SET', KEYS[4], scan[1])
local fields = scan[2]
local expired = {}
for j = 1, #fields, 2 do
  local v = fields[j + 1]
  if string.byte(v, 1) == 114 then -- 'r'
    local exp = tonumber(string.match(v, '|(%d+)|[01]$'))
    if exp and exp <= now then expired[#expired + 1] = fields[j] end
  end
end
if #expired > 0 then
  redis.call('HDEL', KEYS[1], unpack(expired))
  local za = {}
  for _, e in ipairs(expired) do za[#za + 1] = now + retention; za[#za + 1] = e end
  redis.call('ZADD', KEYS[3], unpack(za))
end
local markers = redis.call('ZCARD', KEYS[3]) > 0
local curs = redis.call('HMGET', KEYS[1], unpack(ids))
local expiryText = string.format('%.0f', now + lease)
local pending, out, args = {}, {}, {}
for i = 1, #ids do
  local id, token = ids[i], tokens[i]
  local c = pending[id] or curs[i]
  local r
  if c and string.byte(c, 1) == 99 then -- 'c'
    r = 'D'
  else
    local pd = 0
    if c then
      local owner, exp, flag = string.match(c, '^r(.*)|(%d+)|([01])$')
      if owner == token then r = flag == '1' and 'P' or 'R'
      elseif tonumber(exp) > now then r = 'B'
      else pd = 1 end
    elseif markers then
      local m = redis.call('ZSCORE', KEYS[3], id)
      if m and tonumber(m) > now then pd = 1 end
    end
    if not r then
      local v = 'r' .. token .. '|' .. expiryText .. '|' .. pd
      pending[id] = v
      args[#args + 1] = id
      args[#args + 1] = v
      r = pd == 1 and 'P' or 'R'
    end
  end
  out[i] = r
end
if #args > 0 then redis.call('HSET', KEYS[1], unpack(args)) end
return table.concat(out)
