--[[
  stamp-release: make a stamp claimable again at once (its holder gave the message back unacknowledged).

  KEYS[1] stamps  HASH id -> "token|leaseExpiry" (token empty = free to claim); tagged with the source address

  ARGV[1] id
  ARGV[2] owner token
  ARGV[3] record ttl (ms)

  Returns
  {0}      OK         released
  {4}      NOT_OWNER  the caller does not hold this stamp: nothing changed
  {9, msg} BAD_ARGUMENT
]]
local id, token, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if token == nil or token == '' then return {9, 'empty token'} end
if not (ttl and ttl > 0) then return {9, 'bad numbers'} end

local cur = redis.call('HGET', KEYS[1], id)
if not cur then return {4} end
if string.match(cur, '^(.*)|%d+$') ~= token then return {4} end
redis.call('HSET', KEYS[1], id, '|0')
redis.call('PEXPIRE', KEYS[1], ttl)
return {0}
