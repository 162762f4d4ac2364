--[[
  release: end the caller's reservation without recording the ID. Idempotent; a no-op for a non-owner.

  KEYS[1] st         HASH id -> its entry (st-entry.inc.lua): recorded, reserved, or both
  KEYS[2] uncertain  ZSET id -> marker expiry (ms)

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
--#include st-entry.inc.lua

local _, atText, res = readEntry(redis.call('HGET', KEYS[1], id))
if not res then return {4} end
local owner, flag = string.match(res, '^(.*)|%d+|([01])$')
if owner ~= token then return {4} end

-- A recorded ID keeps its record; only the reservation that shared its entry ends.
local left = makeEntry(atText, nil)
if left then redis.call('HSET', KEYS[1], id, left) else redis.call('HDEL', KEYS[1], id) end
if uncertain == '1' or flag == '1' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[2], now + retention, id)
  redis.call('PEXPIRE', KEYS[2], retention)
  local excess = redis.call('ZCARD', KEYS[2]) - maxMarkers
  if excess > 0 then redis.call('ZPOPMIN', KEYS[2], excess) end
end
return {0}
