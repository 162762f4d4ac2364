--[[
  stamp-release: make a stamp claimable again at once (its holder gave the message back unacknowledged). Its mark
  stays, or becomes ARGV[4] when given: `u` for the stamp of a message acked without proof that the ack arrived.

  KEYS[1] stamps  HASH id -> "owner|leaseExpiry[|d]" (see stamp-entry.inc.lua); tagged with the source address

  ARGV[1] id
  ARGV[2] owner token
  ARGV[3] record ttl (ms)
  ARGV[4] (optional) the new mark: 'u'

  Returns
  {0}      OK         released
  {4}      NOT_OWNER  the caller does not hold this stamp: nothing changed
  {9, msg} BAD_ARGUMENT
]]
local id, token, ttl, newMark = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if token == nil or token == '' then return {9, 'empty token'} end
if not (ttl and ttl > 0) then return {9, 'bad numbers'} end
if newMark ~= nil and newMark ~= 'u' then return {9, 'bad mark'} end
--#include stamp-entry.inc.lua

local owner, _, mark = ownStamp(id, token)
if owner == nil then return {4} end
redis.call('HSET', KEYS[1], id, stampValue('', 0, newMark or mark))
redis.call('PEXPIRE', KEYS[1], ttl)
return {0}
