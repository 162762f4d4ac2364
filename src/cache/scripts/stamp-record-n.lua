--[[
  stamp-record: remember that each ID was stamped on a message with its fingerprint, held by the caller's delivery.
  Many records of one source go in one call (their keys share the source's hash tag); each is handled as if alone.

  KEYS[i]  stamps  HASH id -> "owner|leaseExpiry[|mark]" (see stamp-entry.inc.lua), one key per record (the same key
                   may come back, for byte-identical messages); tagged with the source address

  ARGV[1] lease (ms)
  ARGV[2] record ttl (ms): a fingerprint's record is forgotten after this long without a write
  ARGV[3 + 3(i-1) ..] for KEYS[i]: id, owner token, flagged (1 = every copy forwarded under it is a possible
                      duplicate: mark `f`; 0 = none)

  Returns
  {0}      OK
  {9, msg} BAD_ARGUMENT (for the whole call; nothing written)
]]
local lease, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
if not (lease and lease > 0 and ttl and ttl > 0) then return {9, 'bad numbers'} end
if #KEYS == 0 or #ARGV ~= 2 + 3 * #KEYS then return {9, 'expected id, token and flag for every key'} end
for i = 1, #KEYS do
  local token = ARGV[3 + 3 * (i - 1) + 1]
  if token == nil or token == '' then return {9, 'empty token'} end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = string.format('%.0f', now + lease)
for i = 1, #KEYS do
  local base = 3 + 3 * (i - 1)
  local id, token, flagged = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  redis.call('HSET', KEYS[i], id, token .. '|' .. expiry .. (flagged == '1' and '|f' or ''))
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return {0}
