--[[
  stamp-forget: drop one stamp once its source message is acknowledged. Idempotent.

  KEYS[1] stamps  HASH id -> "token|leaseExpiry"; tagged with the source address

  ARGV[1] id

  Returns
  {0}  OK  (also when the stamp was not there)
]]
redis.call('HDEL', KEYS[1], ARGV[1])
return {0}
