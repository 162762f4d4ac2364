--[[
  stamp-renew: extend the lease of stamps their holders still work on, so that no claim takes a stamp from a live
  delivery that takes longer than the lease (a blocked target, a slow one). The session calls it every third of the
  lease for the stamps its unsettled deliveries hold.

  KEYS[1] stamps  HASH id -> "owner|leaseExpiry[|d]" (see stamp-entry.inc.lua); tagged with the source address

  ARGV[1] lease (ms)
  ARGV[2] record ttl (ms)
  ARGV[3 ..] id, owner token, id, owner token, ...

  Returns
  {0, id, ...}  OK: renewed every stamp its token still holds; the IDs that follow are held no more (taken over, or
                forgotten): their deliveries must not be forwarded under them
  {9, msg}      BAD_ARGUMENT
]]
local lease, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
if not (lease and lease > 0 and ttl and ttl > 0 and #ARGV % 2 == 0) then return {9, 'bad numbers'} end
--#include stamp-entry.inc.lua

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {0}
for i = 3, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local owner, _, mark = ownStamp(id, token)
  if owner == nil or token == '' then
    out[#out + 1] = id
  else
    redis.call('HSET', KEYS[1], id, stampValue(owner, now + lease, mark))
  end
end
redis.call('PEXPIRE', KEYS[1], ttl)
return out
