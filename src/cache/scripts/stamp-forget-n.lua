--[[
  stamp-forget: drop stamps once their source messages are acknowledged (and the acks reached the broker). Many of one
  source go in one call (their keys share the source's hash tag). Idempotent.

  KEYS[i]  stamps  HASH id -> "owner|leaseExpiry[|mark]"; tagged with the source address

  ARGV[i] the ID to drop from KEYS[i]

  Returns
  {0}      OK  (also for stamps that were not there)
  {9, msg} BAD_ARGUMENT
]]
if #KEYS == 0 or #ARGV ~= #KEYS then return {9, 'expected one id for every key'} end
for i = 1, #KEYS do redis.call('HDEL', KEYS[i], ARGV[i]) end
return {0}
