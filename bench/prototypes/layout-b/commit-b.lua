-- A PROTOTYPE (bench/prototypes/layout-b/compare.ts), not the product: layout B commit.
-- KEYS: st, ids, uncertain, seq   ARGV: id-cache-size, ttl (unused), all id/token pairs packed
local size = tonumber(ARGV[1])
local ok, count, ids, tokens = pcall(cmsgpack.unpack, ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local markers = redis.call('ZCARD', KEYS[3]) > 0
local curs = redis.call('HMGET', KEYS[1], unpack(ids))
local seq = tonumber(redis.call('GET', KEYS[4]) or '0')
local first = seq
local nowText = 'c' .. string.format('%.0f', now)
local recorded, stArgs, idsArgs = {}, {}, {}
for i = 1, #ids do
  local id = ids[i]
  local c = curs[i]
  if not recorded[id] and not (c and string.byte(c, 1) == 99) then
    -- a live reservation of another owner would be kept in the real thing (separate field); prototype overwrites
    recorded[id] = true
    seq = seq + 1
    idsArgs[#idsArgs + 1] = seq
    idsArgs[#idsArgs + 1] = id
    stArgs[#stArgs + 1] = id
    stArgs[#stArgs + 1] = nowText
  end
end
if markers then redis.call('ZREM', KEYS[3], unpack(ids)) end
if seq > first then
  redis.call('ZADD', KEYS[2], unpack(idsArgs))
  redis.call('HSET', KEYS[1], unpack(stArgs))
  redis.call('SET', KEYS[4], string.format('%.0f', seq))
end
local excess = redis.call('ZCARD', KEYS[2]) - size
if excess > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], excess)
  local evicted = {}
  for k = 1, #popped, 2 do evicted[#evicted + 1] = popped[k] end
  redis.call('HDEL', KEYS[1], unpack(evicted))
end
return {0}
