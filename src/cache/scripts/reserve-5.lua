--[[
  reserve: claim the right to forward one message ID to one target address.

  KEYS[1] ids        ZSET  id -> commit sequence (the circular cache)
  KEYS[2] at         HASH  id -> commit time (ms, Redis clock); holds exactly the IDs of `ids`
  KEYS[3] res        HASH  id -> "token|expiry|possibleDuplicate"
  KEYS[4] res-exp    ZSET  id -> reservation expiry (ms)
  KEYS[5] uncertain  ZSET  id -> marker expiry (ms): the ID's last send had an unknown outcome

  ARGV[1] id
  ARGV[2] owner token (non-empty; one delivery of one message in one process)
  ARGV[3] lease (ms)
  ARGV[4] id-cache-ttl (ms, 0 = none)
  ARGV[5] marker retention (ms): how long an uncertain marker (or an abandoned reservation) is remembered
  ARGV[6] most markers kept per address (the oldest beyond it are dropped)
  ARGV[7] cleanup batch: most expired entries removed per ID asked for (bounded work)
  ARGV[8] optional: more id/token pairs, packed as MessagePack (see id-token-pairs.inc.lua; at most 1000 IDs in all),
          or '' for none. One call reserves many IDs of one address, in order, each exactly as if reserved alone.
  ARGV[9] optional: owners known dead, space-separated: the first part of a token (its process, up to the first '.')
          whose liveness key is gone. Their reservations are taken over at once, as expired ones are. '' for none.
  ARGV[10] optional: idle expiry (ms, 0 or absent = none), as in commit-6.lua: a reserve keeps the address's
          recorded IDs and its epoch marker alive as a commit does (an address in use keeps its IDs).

  Returns one character per ID, in order, as one string (a short reply is cheap for the client to decode):
  R   RESERVED    the caller holds the reservation
  P   RESERVED    the same, and the ID may already be at the target (a possible duplicate)
  D   DUPLICATE   the ID is recorded (and not expired)
  B   BUSY        another owner holds a live reservation
  followed, when any ID is busy, by '|' and the holders' processes (space-separated, each once), so that the caller
  can ask whether they are alive and call again naming the dead ones;
  or {9, msg}  BAD_ARGUMENT (for the whole call)

  A replay (same token) answers what the first call answered: the possible-duplicate flag is stored with the
  reservation. An expired reservation of another owner is taken over with pd = 1 (its owner may have sent it).
]]
local lease, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local retention, maxMarkers, batch = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local idle = tonumber(ARGV[10] or '0')
if not (lease and lease > 0 and ttl and ttl >= 0 and retention and retention > 0 and maxMarkers and batch and idle and idle >= 0) then
  return {9, 'bad numbers'}
end
local PACKED_ARG = 8
--#include id-token-pairs.inc.lua

-- Owners known dead (ARGV[9]): a process's tokens start with its name and a '.'.
local dead = {}
if ARGV[9] then
  for owner in string.gmatch(ARGV[9], '%S+') do dead[owner] = true end
end
local holders, holderList = {}, {}

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Housekeeping work grows with the IDs asked for, as if each had been reserved by a call of its own.
local limit = batch * #ids

-- Bounded housekeeping, so that reservations never committed or released cannot pile up. An abandoned
-- reservation becomes an uncertain marker: its owner may have sent the message before vanishing.
-- (IDs asked for in this call are left to the checks below.)
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, limit)
local asked = {}
if #expired > 0 then
  for i = 1, #ids do asked[ids[i]] = true end
end
for _, e in ipairs(expired) do
  if not asked[e] then
    redis.call('HDEL', KEYS[3], e)
    redis.call('ZREM', KEYS[4], e)
    redis.call('ZADD', KEYS[5], now + retention, e)
  end
end
if #expired > 0 then redis.call('PEXPIRE', KEYS[5], retention) end
local old = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, limit)
for _, o in ipairs(old) do redis.call('ZREM', KEYS[5], o) end
local excess = redis.call('ZCARD', KEYS[5]) - maxMarkers
if excess > 0 then redis.call('ZPOPMIN', KEYS[5], excess) end
if ttl > 0 then
  --#include forget-expired-ids.inc.lua
end

-- Markers are rare: when there are none, skip looking for them per ID.
local markers = redis.call('ZCARD', KEYS[5]) > 0

-- Everything a reservation depends on is read with one command per key for the whole call and written back the
-- same way: a call per ID per key would cost Redis several times the work of the checks themselves. `pending` holds
-- what this call has already changed, so that an ID asked for twice in one call is answered exactly as two calls in
-- a row would be.
local ats = redis.call('HMGET', KEYS[2], unpack(ids))
local curs = redis.call('HMGET', KEYS[3], unpack(ids))
local pending, gone = {}, {}
local resArgs, expArgs, forget = {}, {}, {}
-- `now` is fixed for the call, so every reservation made in it has the same expiry.
local expiry = now + lease
local expiryText = string.format('%.0f', expiry)

local function reserve(i, id, token)
  -- Recorded? (`at` holds exactly the recorded IDs, with their commit time.)
  local at = not gone[id] and ats[i]
  if at then
    if ttl == 0 or now - tonumber(at) < ttl then return 'D' end
    -- Expired: it counts as absent, and goes.
    gone[id] = true
    forget[#forget + 1] = id
  end

  -- Reserved?
  local pd = 0
  local cur = pending[id] or curs[i]
  if cur then
    local owner, exp, flag = string.match(cur, '^(.*)|(%d+)|([01])$')
    if owner == token then return flag == '1' and 'P' or 'R' end
    if exp and tonumber(exp) > now then
      local process = string.match(owner, '^[^.]*')
      if not dead[process] then
        if not holders[process] then
          holders[process] = true
          holderList[#holderList + 1] = process
        end
        return 'B'
      end
    end
    pd = 1
  elseif markers then
    local marker = redis.call('ZSCORE', KEYS[5], id)
    if marker and tonumber(marker) > now then pd = 1 end
  end

  -- The flag now lives with the reservation; a release keeps it (see release-3.lua), a commit ends it.
  local value = token .. '|' .. expiryText .. '|' .. pd
  pending[id] = value
  resArgs[#resArgs + 1] = id
  resArgs[#resArgs + 1] = value
  -- The score as text made once: a number argument is formatted again for every ID.
  expArgs[#expArgs + 1] = expiryText
  expArgs[#expArgs + 1] = id
  return pd == 1 and 'P' or 'R'
end

local out = {}
for i = 1, #ids do out[i] = reserve(i, ids[i], tokens[i]) end
if #forget > 0 then
  redis.call('ZREM', KEYS[1], unpack(forget))
  redis.call('HDEL', KEYS[2], unpack(forget))
end
if #resArgs > 0 then
  redis.call('HSET', KEYS[3], unpack(resArgs))
  redis.call('ZADD', KEYS[4], unpack(expArgs))
  if markers then
    local reserved = {}
    for k = 1, #resArgs, 2 do reserved[#reserved + 1] = resArgs[k] end
    redis.call('ZREM', KEYS[5], unpack(reserved))
  end
end
-- If the address goes quiet, its reservation keys vanish once every entry would have been forgotten anyway.
redis.call('PEXPIRE', KEYS[3], lease + retention)
redis.call('PEXPIRE', KEYS[4], lease + retention)
if idle > 0 then
  if ttl == 0 then
    redis.call('PEXPIRE', KEYS[1], idle)
    redis.call('PEXPIRE', KEYS[2], idle)
  end
  redis.call('PEXPIRE', epochKey, math.max(idle, ttl))
end
if #holderList > 0 then return table.concat(out) .. '|' .. table.concat(holderList, ' ') end
return table.concat(out)
