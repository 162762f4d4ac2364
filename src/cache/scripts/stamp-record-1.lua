--[[
  stamp-record: remember that ID was stamped on a message with this fingerprint, held by the caller.

  KEYS[1] stamps  HASH id -> "owner|leaseExpiry[|mark]" (see stamp-entry.inc.lua); tagged with the source address

  ARGV[1] id
  ARGV[2] owner token
  ARGV[3] lease (ms)
  ARGV[4] record ttl (ms): the whole fingerprint record is forgotten after this long without a write
  ARGV[5] optional: 1 = every copy forwarded under this stamp is a possible duplicate (mark `f`)

  Returns
  {0}      OK
  {9, msg} BAD_ARGUMENT
]]
local id, token, lease, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if token == nil or token == '' then return {9, 'empty token'} end
if not (lease and lease > 0 and ttl and ttl > 0) then return {9, 'bad numbers'} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], id, token .. '|' .. string.format('%.0f', now + lease) .. (ARGV[5] == '1' and '|f' or ''))
redis.call('PEXPIRE', KEYS[1], ttl)
return {0}
