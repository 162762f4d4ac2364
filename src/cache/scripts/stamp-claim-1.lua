--[[
  stamp-claim: a redelivered message without a stable identity looks for the stamp of its first delivery among the
  stamps recorded for its fingerprint. It must never take the stamp of a message that was already forwarded while one
  of a message that was not is, or may become, free (that drops a message), and it must never take a forwarded one at
  all: it cannot tell its own from one whose message was acked. So it takes only a stamp whose ID the caller has
  just found *not* recorded at the target address; failing that, it waits for stamps held since before it asked, and
  then stamps a new ID, flagged when a copy of a handled message may be coming back. See src/core/stamp-claim.ts.

  KEYS[1] stamps  HASH id -> "owner|leaseExpiry[|d]" (see stamp-entry.inc.lua); tagged with the source address

  ARGV[1] owner token
  ARGV[2] lease (ms)
  ARGV[3] record ttl (ms)
  ARGV[4] own prefix: the prefix of the tokens of the caller's session. Stamps its live jobs hold belong to those
          jobs (first deliveries, or redeliveries that already claimed them): never waited for, never asked about.
  ARGV[5] since (ms, Redis clock): stamps taken (recorded or claimed) after it cannot be this message's; 0 = now
  ARGV[6] n: how many IDs follow as "recorded at the target" (they are marked done)
  ARGV[7 .. 6+n]  IDs the caller found recorded at the target address
  ARGV[7+n ..]    IDs the caller found not recorded at the target address

  Returns
  {5, id}       CLAIMED  the caller holds this stamp (a replay answers the same): forward under it
  {7, id, ...}  CHECK    ask the target's cache which of these IDs are recorded, then call again with the answer
  {3, now}      BUSY     a stamp that may be this message's is held by another owner: try later, passing `now` as since
  {6, flag}     NONE     no stamp to take: stamp a new ID; flag 1 = flag it as a possible duplicate (a done stamp
                         exists, so this may be a handled message whose ack was lost)
  {9, msg}      BAD_ARGUMENT
]]
local token, lease, ttl, ownPrefix = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local since, n = tonumber(ARGV[5]), tonumber(ARGV[6])
if token == nil or token == '' or ownPrefix == nil or ownPrefix == '' then return {9, 'empty token or prefix'} end
if not (lease and lease > 0 and ttl and ttl > 0 and since and since >= 0 and n and n >= 0 and 6 + n <= #ARGV) then
  return {9, 'bad numbers'}
end
--#include stamp-entry.inc.lua

local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then return {6, 0} end
for i = 1, #all, 2 do
  local owner = parseStamp(all[i + 1])
  if owner == token then return {5, all[i]} end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if since == 0 then since = now end
local recorded, notRecorded = {}, {}
for i = 7, 6 + n do recorded[ARGV[i]] = true end
for i = 7 + n, #ARGV do notRecorded[ARGV[i]] = true end

local entries = {}
local marked = false
for i = 1, #all, 2 do
  local id = all[i]
  local owner, exp, mark = parseStamp(all[i + 1])
  local free = owner == nil or owner == '' or exp == nil or exp <= now
  if mark ~= 'd' and recorded[id] then
    -- Sticky: once recorded at the target the ID stays handled, even after the circular cache evicts it.
    mark = 'd'
    redis.call('HSET', KEYS[1], id, (owner or '') .. '|' .. string.format('%.0f', exp or 0) .. '|d')
    marked = true
  end
  local own = (not free) and string.sub(owner, 1, #ownPrefix) == ownPrefix
  -- Taken after `since`: by a delivery that arrived after this message was redelivered, so not this message's.
  local late = (not free) and exp - lease > since
  entries[#entries + 1] = { id = id, free = free, done = mark == 'd', own = own, late = late }
end
if marked then redis.call('PEXPIRE', KEYS[1], ttl) end

-- 1. A free stamp whose ID the caller just found not recorded: its message was never forwarded (or its copy is
--    flagged by the target cache's uncertain marker or abandoned reservation). Taking it can drop nothing.
for _, e in ipairs(entries) do
  if e.free and not e.done and notRecorded[e.id] then
    redis.call('HSET', KEYS[1], e.id, token .. '|' .. string.format('%.0f', now + lease))
    redis.call('PEXPIRE', KEYS[1], ttl)
    return {5, e.id}
  end
end
-- 2. Stamps not done, not this session's own, not late, whose state the caller has not seen: ask.
local unknown = {7}
for _, e in ipairs(entries) do
  if not e.done and not e.own and not e.late and not notRecorded[e.id] then unknown[#unknown + 1] = e.id end
end
if #unknown > 1 then return unknown end
-- 3. A stamp not done, held by another owner since before `since` (a live one, or a crashed one whose lease still
--    runs): it may be this message's own. Wait until it is forwarded and recorded, or freed.
for _, e in ipairs(entries) do
  if not e.done and not e.own and not e.late and not e.free then return {3, now} end
end
-- 4. Nothing left that can be this message's: it was never stamped (delivered, but the bridge died before it
--    recorded a stamp), or it was forwarded and its ack was lost. A done stamp (not this session's) says the second
--    is possible: flag the new copy.
for _, e in ipairs(entries) do
  if e.done and not e.own then return {6, 1} end
end
return {6, 0}
