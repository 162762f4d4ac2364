--[[
  stamp-done: mark a stamp done because its message was handled without its ID being recorded at the target
  (dead-lettered). A redelivery of that message (an ack lost in a crash) that takes it is then dropped.

  KEYS[1] stamps  HASH id -> "owner|leaseExpiry[|d]" (see stamp-entry.inc.lua); tagged with the source address

  ARGV[1] id
  ARGV[2] owner token
  ARGV[3] record ttl (ms)

  Returns
  {0}      OK         marked
  {4}      NOT_OWNER  the caller does not hold this stamp: nothing changed
  {9, msg} BAD_ARGUMENT
]]
local id, token, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if token == nil or token == '' then return {9, 'empty token'} end
if not (ttl and ttl > 0) then return {9, 'bad numbers'} end
--#include stamp-entry.inc.lua

local owner, exp = ownStamp(id, token)
if owner == nil then return {4} end
redis.call('HSET', KEYS[1], id, stampValue(owner, exp, 'd'))
redis.call('PEXPIRE', KEYS[1], ttl)
return {0}
