--[[
  reserve: claim the right to forward one message ID to one target address.

  KEYS[1] ids        ZSET   id -> commit sequence (the circular cache)
  KEYS[2] st         HASH   id -> its entry: recorded "c<time>", reserved "r<token>|<expiry>|<pd>", or both
                            (st-entry.inc.lua); holds a "c" entry for exactly the IDs of `ids`
  KEYS[3] st-scan    STRING the cursor of the bounded HSCAN of `st` that finds abandoned reservations
  KEYS[4] uncertain  ZSET   id -> marker expiry (ms): the ID's last send had an unknown outcome

  ARGV[1] id
  ARGV[2] owner token (non-empty; one delivery of one message in one process)
  ARGV[3] lease (ms)
  ARGV[4] id-cache-ttl (ms, 0 = none)
  ARGV[5] marker retention (ms): how long an uncertain marker (or an abandoned reservation) is remembered
  ARGV[6] most markers kept per address (the oldest beyond it are dropped)
  ARGV[7] cleanup batch: most expired recorded IDs forgotten per ID asked for (bounded work)
  ARGV[8] optional: more id/token pairs, packed as MessagePack (see id-token-pairs.inc.lua; at most 1000 IDs in all),
          or '' for none. One call reserves many IDs of one address, in order, each exactly as if reserved alone.
  ARGV[9] optional: owners known dead, space-separated: the first part of a token (its process, up to the first '.')
          whose liveness key is gone. Their reservations are taken over at once, as expired ones are. '' for none.
  ARGV[10] optional: idle expiry (ms, 0 or absent = none), as in commit-4.lua: a reserve keeps the address's
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
  One HMGET reads every ID's whole state (layout 1 read two hashes and kept a sorted set of expiries besides:
  docs/measurements.md "Where detection's cost goes").
]]
local lease, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local retention, maxMarkers, batch = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local idle = tonumber(ARGV[10] or '0')
if not (lease and lease > 0 and ttl and ttl >= 0 and retention and retention > 0 and maxMarkers and batch and idle and idle >= 0) then
  return {9, 'bad numbers'}
end
local PACKED_ARG = 8
--#include id-token-pairs.inc.lua
--#include st-entry.inc.lua
local idsKey, stKey = KEYS[1], KEYS[2]

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

-- Bounded housekeeping, so that reservations never committed or released cannot pile up: about one entry of `st` per
-- ID asked for (HSCAN's COUNT counts buckets), from where the last call stopped, so that the whole hash is swept once
-- per about as many IDs reserved as it has buckets. (Two per ID cost the reserve more than layout 1's sorted set of
-- expiries: docs/measurements.md#the-caches-layout-2-issue-47-2026-12-07.) An
-- abandoned reservation becomes an uncertain marker (its owner may have sent the message before vanishing), unless it
-- expired longer than the retention ago. (IDs asked for in this call are left to the checks below: a replay of an
-- expired reservation answers as the first call did.)
local cursor = redis.call('GET', KEYS[3]) or '0'
local scan = redis.call('HSCAN', stKey, cursor, 'COUNT', #ids)
local found, asked = scan[2], nil
local markerArgs, dropped = {}, {}
for j = 1, #found, 2 do
  local v = found[j + 1]
  -- Most entries are plain records ("c<time>", no '|'): a byte and a plain find skip them without a pattern.
  local exp = (string.byte(v, 1) == 114 or string.find(v, '|', 1, true)) and tonumber(string.match(v, '|(%d+)|[01]$'))
  if exp and exp <= now then
    local id = found[j]
    if not asked then
      asked = {}
      for i = 1, #ids do asked[ids[i]] = true end
    end
    if not asked[id] then
      local _, atText = readEntry(v)
      local left = makeEntry(atText, nil)
      if left then redis.call('HSET', stKey, id, left) else dropped[#dropped + 1] = id end
      if exp + retention > now then
        markerArgs[#markerArgs + 1] = now + retention
        markerArgs[#markerArgs + 1] = id
      end
    end
  end
end
if #dropped > 0 then redis.call('HDEL', stKey, unpack(dropped)) end
if #markerArgs > 0 then
  redis.call('ZADD', KEYS[4], unpack(markerArgs))
  redis.call('PEXPIRE', KEYS[4], retention)
end
local old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, limit)
for _, o in ipairs(old) do redis.call('ZREM', KEYS[4], o) end
local excess = redis.call('ZCARD', KEYS[4]) - maxMarkers
if excess > 0 then redis.call('ZPOPMIN', KEYS[4], excess) end
if ttl > 0 then
  --#include forget-expired-ids.inc.lua
end

-- Markers are rare: when there are none, skip looking for them per ID.
local markers = redis.call('ZCARD', KEYS[4]) > 0

-- One read for the whole call and one write after it: a call per ID would cost Redis several times the work of the
-- checks themselves. `state` holds what this call has already changed, so that an ID asked for twice in one call is
-- answered exactly as two calls in a row would be.
local curs = redis.call('HMGET', stKey, unpack(ids))
local state, touched = {}, {}
local forget, reserved = {}, {}
-- `now` is fixed for the call, so every reservation made in it has the same expiry.
local expiryText = string.format('%.0f', now + lease)

local function write(id, v)
  if state[id] == nil then touched[#touched + 1] = id end
  state[id] = v
end

local function reserve(i, id, token)
  local cur = state[id]
  if cur == nil then cur = curs[i] end
  local at, _, res = readEntry(cur)
  if at then
    if ttl == 0 or now - at < ttl then return 'D' end
    -- Expired: it counts as absent, and goes (a reservation sharing its entry stays).
    forget[#forget + 1] = id
    write(id, makeEntry(nil, res))
  end

  -- Reserved? An abandoned reservation is remembered for the marker retention after its lease ran out, as a marker is.
  local pd = 0
  if res then
    local owner, exp, flag = string.match(res, '^(.*)|(%d+)|([01])$')
    if owner == token then return flag == '1' and 'P' or 'R' end
    exp = tonumber(exp)
    if exp and exp > now then
      local process = string.match(owner, '^[^.]*')
      if not dead[process] then
        if not holders[process] then
          holders[process] = true
          holderList[#holderList + 1] = process
        end
        return 'B'
      end
    end
    if not exp or exp + retention > now then pd = 1 end
  end
  if pd == 0 and markers then
    local marker = redis.call('ZSCORE', KEYS[4], id)
    if marker and tonumber(marker) > now then pd = 1 end
  end

  -- The flag now lives with the reservation; a release keeps it (see release-2.lua), a commit ends it.
  write(id, 'r' .. token .. '|' .. expiryText .. '|' .. pd)
  reserved[#reserved + 1] = id
  return pd == 1 and 'P' or 'R'
end

local out = {}
for i = 1, #ids do out[i] = reserve(i, ids[i], tokens[i]) end
if #forget > 0 then redis.call('ZREM', idsKey, unpack(forget)) end
local setArgs, delArgs = {}, {}
for _, id in ipairs(touched) do
  local v = state[id]
  if v then
    setArgs[#setArgs + 1] = id
    setArgs[#setArgs + 1] = v
  else
    delArgs[#delArgs + 1] = id
  end
end
if #setArgs > 0 then redis.call('HSET', stKey, unpack(setArgs)) end
if #delArgs > 0 then redis.call('HDEL', stKey, unpack(delArgs)) end
if markers and #reserved > 0 then redis.call('ZREM', KEYS[4], unpack(reserved)) end

-- The address's keys go when it has been quiet for the idle expiry, or (with id-cache-ttl) once every recorded ID in
-- them is older than the ttl and every reservation's lease has run out (entries past the ttl read as absent anyway).
-- Without either they are kept, as the recorded IDs are; the sweep above keeps the reservations among them bounded.
-- (An idle expiry shorter than a lease would let a quiet address's live reservation go with it: the configuration
-- warns long before that, below loss-window.)
local keep = ttl > 0 and math.max(ttl, lease) or idle
-- The cursor is written only when it moved, and with pcall: under maxmemory with noeviction a reserve that answers
-- from what is there (a duplicate, a busy ID) still answers; the sweep then stays where it was.
if scan[1] ~= cursor then
  if keep > 0 then redis.pcall('SET', KEYS[3], scan[1], 'PX', keep) else redis.pcall('SET', KEYS[3], scan[1]) end
elseif keep > 0 then
  redis.call('PEXPIRE', KEYS[3], keep)
end
if keep > 0 then
  redis.call('PEXPIRE', stKey, keep)
  if ttl == 0 then redis.call('PEXPIRE', idsKey, idle) end
end
if idle > 0 then redis.call('PEXPIRE', epochKey, math.max(idle, ttl)) end
if #holderList > 0 then return table.concat(out) .. '|' .. table.concat(holderList, ' ') end
return table.concat(out)
