--[[
  stamp-claim: a redelivered message without a stable identity looks for the stamp of its first delivery among the
  stamps recorded for its fingerprint. It must never take the stamp of a message that was already forwarded while one
  of a message that was not is, or may become, free (that drops a message). So it takes a stamp whose ID the caller
  has just found *not* recorded at the target address; failing that, it waits for stamps held since before it asked;
  then it takes the fingerprint's only stamp if that one is done (a forwarded message whose ack was lost: dropped), or
  else stamps a new ID, flagged when a copy of a handled message may be coming back. See src/core/stamp-claim.ts.

  KEYS[1] stamps  HASH id -> "owner|leaseExpiry[|d]" (see stamp-entry.inc.lua); tagged with the source address

  ARGV[1] owner token
  ARGV[2] lease (ms)
  ARGV[3] record ttl (ms)
  ARGV[4] own prefix: the prefix of the tokens of the caller's session. Stamps its live jobs hold belong to those
          jobs (first deliveries, or redeliveries that already claimed them): never waited for, never asked about.
  ARGV[5] since (ms, Redis clock): stamps taken (recorded or claimed) after it cannot be this message's; 0 = now
  ARGV[6] owners known dead, space-separated (the first part of their tokens, up to the first '.'): their stamps are
          free to claim at once, as stamps whose lease ran out are; '' for none
  ARGV[7] n: how many IDs follow as "recorded at the target" (they are marked done)
  ARGV[8 .. 7+n]  IDs the caller found recorded at the target address
  ARGV[8+n ..]    IDs the caller found not recorded at the target address

  Returns
  {5, id, f, d} CLAIMED  the caller holds this stamp (a replay answers the same). d = 0: forward under it, flagged as a
                         possible duplicate when f = 1 (mark `f`); d = 1: the stamp is done (rule 3), drop the
                         redelivery as the duplicate of the message forwarded under it
  {7, id, ...}  CHECK    ask the target's cache which of these IDs are recorded, then call again with the answer
  {3, now, p..}  BUSY    a stamp that may be this message's is held by another owner: try later, passing `now` as since;
                         the holders' processes follow (each once), to be asked whether they are alive
  {6, flag}     NONE     no stamp to take: stamp a new ID; flag 1 = flag it as a possible duplicate (a done stamp
                         exists, so this may be a handled message whose ack was lost), and record it with mark `f`
  {9, msg}      BAD_ARGUMENT
]]
local token, lease, ttl, ownPrefix = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local since, n = tonumber(ARGV[5]), tonumber(ARGV[7])
if token == nil or token == '' or ownPrefix == nil or ownPrefix == '' then return {9, 'empty token or prefix'} end
if not (lease and lease > 0 and ttl and ttl > 0 and since and since >= 0 and n and n >= 0 and 7 + n <= #ARGV) then
  return {9, 'bad numbers'}
end
local dead = {}
for owner in string.gmatch(ARGV[6] or '', '%S+') do dead[owner] = true end
local function processOf(owner) return string.match(owner or '', '^[^.]*') end
--#include stamp-entry.inc.lua

local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then return {6, 0} end
for i = 1, #all, 2 do
  local owner, _, mark = parseStamp(all[i + 1])
  if owner == token then return {5, all[i], mark == 'f' and 1 or 0, (mark == 'd' or mark == 'u') and 1 or 0} end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if since == 0 then since = now end
local recorded, notRecorded = {}, {}
for i = 8, 7 + n do recorded[ARGV[i]] = true end
for i = 8 + n, #ARGV do notRecorded[ARGV[i]] = true end

local entries = {}
local marked = false
for i = 1, #all, 2 do
  local id = all[i]
  local owner, exp, mark = parseStamp(all[i + 1])
  -- The caller's own session is alive (it is asking) and renews its stamps: its entries stand for its live
  -- deliveries, whatever their lease says.
  local own = owner ~= nil and owner ~= '' and string.sub(owner, 1, #ownPrefix) == ownPrefix
  local free = (not own) and (owner == nil or owner == '' or exp == nil or exp <= now or dead[processOf(owner)] == true)
  if mark ~= 'd' and mark ~= 'u' and recorded[id] then
    -- Sticky: once recorded at the target the ID stays handled, even after the circular cache evicts it.
    mark = 'd'
    redis.call('HSET', KEYS[1], id, stampValue(owner or '', exp or 0, 'd'))
    marked = true
  end
  -- Taken after `since`: by a delivery that arrived after this message was redelivered, so not this message's.
  local late = (not free) and (not own) and exp - lease > since
  entries[#entries + 1] = { id = id, free = free, done = mark == 'd' or mark == 'u', mark = mark, own = own, late = late, owner = owner }
end
if marked then redis.call('PEXPIRE', KEYS[1], ttl) end

-- The caller takes a stamp (its mark stays): CLAIMED, with d = 1 when it is done (rule 3).
local function take(e, done)
  redis.call('HSET', KEYS[1], e.id, stampValue(token, now + lease, e.mark))
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {5, e.id, e.mark == 'f' and 1 or 0, done}
end

-- 1. A free stamp whose ID the caller just found not recorded: its message was never forwarded (or its copy is
--    flagged by the target cache's uncertain marker or abandoned reservation). Taking it can drop nothing.
for _, e in ipairs(entries) do
  if e.free and not e.done and notRecorded[e.id] then return take(e, 0) end
end
-- Before deciding: stamps not done, not this session's own, not late, whose state the caller has not seen: ask.
local unknown = {7}
for _, e in ipairs(entries) do
  if not e.done and not e.own and not e.late and not notRecorded[e.id] then unknown[#unknown + 1] = e.id end
end
if #unknown > 1 then return unknown end
-- BUSY, naming the processes that hold what the caller waits for (each once).
local function busy(waitingOn)
  local reply, seen = {3, now}, {}
  for _, e in ipairs(waitingOn) do
    local p = processOf(e.owner)
    if not seen[p] then
      seen[p] = true
      reply[#reply + 1] = p
    end
  end
  return reply
end
-- 2. A stamp not done, held by another owner since before `since` (a live one, or a crashed one whose lease still
--    runs and whose liveness the caller has not found gone): it may be this message's own. Wait until it is forwarded
--    and recorded, or freed.
local held = {}
for _, e in ipairs(entries) do
  if not e.done and not e.own and not e.late and not e.free then held[#held + 1] = e end
end
if #held > 0 then return busy(held) end
-- 3. The fingerprint's only stamp, done, of a crashed owner: a message forwarded and committed whose ack was lost,
--    coming back (the usual case, and the only one for content that is not duplicated) — or a byte-identical twin
--    that the bridge died before stamping, while this stamp waited for its ack barrier. The two cannot be told apart;
--    the first is by far the more common, so take it: the redelivery is dropped as its duplicate, under the same ID.
--    Not a stamp marked `u`: its message was acked, so a twin is as likely as the message itself (rule 4 instead).
if #entries == 1 and entries[1].done and entries[1].mark ~= 'u' and not entries[1].own and not entries[1].late then
  if entries[1].free then return take(entries[1], 1) end
  -- Held: by a live owner about to forget it (its message is not this one), or a crashed one whose lease runs.
  return busy(entries)
end
-- 4. Nothing left that can be this message's: with byte-identical messages in play, it may be one the bridge died
--    before stamping (never forwarded) or a forwarded one whose ack was lost. Never drop it: a new stamp, flagged
--    when a done stamp (not this session's) says the second is possible.
for _, e in ipairs(entries) do
  if e.done and not e.own then return {6, 1} end
end
return {6, 0}
