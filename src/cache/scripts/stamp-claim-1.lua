--[[
  stamp-claim: a redelivered message without a stable identity takes back a stamp recorded for its fingerprint.

  KEYS[1] stamps  HASH id -> "token|leaseExpiry" (token empty = free to claim); tagged with the source address

  ARGV[1] owner token
  ARGV[2] lease (ms)
  ARGV[3] record ttl (ms)

  Returns
  {5, id}  CLAIMED   the caller holds this stamp: already (a replay answers the same ID), or taken now because it
                     was released or its holder's lease expired
  {3}      BUSY      stamps exist but all are held by live owners
  {6}      NONE      no stamp is recorded for this fingerprint
  {9, msg} BAD_ARGUMENT
]]
local token, lease, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if token == nil or token == '' then return {9, 'empty token'} end
if not (lease and lease > 0 and ttl and ttl > 0) then return {9, 'bad numbers'} end

local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then return {6} end
for i = 1, #all, 2 do
  local owner = string.match(all[i + 1], '^(.*)|%d+$')
  if owner == token then return {5, all[i]} end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #all, 2 do
  local owner, exp = string.match(all[i + 1], '^(.*)|(%d+)$')
  if owner == nil or owner == '' or tonumber(exp) <= now then
    redis.call('HSET', KEYS[1], all[i], token .. '|' .. string.format('%.0f', now + lease))
    redis.call('PEXPIRE', KEYS[1], ttl)
    return {5, all[i]}
  end
end
return {3}
