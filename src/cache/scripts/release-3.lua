--[[
  release: end the caller's reservation without recording the ID. Idempotent; a no-op for a non-owner.

  KEYS[1] res        HASH  id -> "token|expiry|possibleDuplicate"
  KEYS[2] res-exp    ZSET  id -> reservation expiry (ms)
  KEYS[3] uncertain  ZSET  id -> marker expiry (ms)

  ARGV[1] id
  ARGV[2] owner token
  ARGV[3] uncertain: 1 when the message may have reached the target, else 0
  ARGV[4] marker retention (ms)
  ARGV[5] most markers kept per address

  Returns
  {0}      OK          the reservation ended
  {4}      NOT_OWNER   no reservation of this token (never reserved, already ended, or taken over): nothing changed
  {9, msg} BAD_ARGUMENT

  The next reserve of the ID answers possibleDuplicate = true when this release is uncertain, and also when this
  reservation itself was already a possible duplicate (a certain failure now does not undo an earlier unknown send).
]]
local id, token = ARGV[1], ARGV[2]
local uncertain, retention, maxMarkers = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
if token == nil or token == '' then return {9, 'empty token'} end
if not (retention and retention > 0 and maxMarkers) then return {9, 'bad numbers'} end

local cur = redis.call('HGET', KEYS[1], id)
if not cur then return {4} end
local owner, flag = string.match(cur, '^(.*)|%d+|([01])$')
if owner ~= token then return {4} end

redis.call('HDEL', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
if uncertain == '1' or flag == '1' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[3], now + retention, id)
  redis.call('PEXPIRE', KEYS[3], retention)
  local excess = redis.call('ZCARD', KEYS[3]) - maxMarkers
  if excess > 0 then redis.call('ZPOPMIN', KEYS[3], excess) end
end
return {0}
