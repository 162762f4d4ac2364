--[[
  commit: record an ID as forwarded to the address and end the reservation. Idempotent.

  KEYS[1] ids        ZSET  id -> commit sequence (the circular cache)
  KEYS[2] at         HASH  id -> commit time (ms, Redis clock); holds exactly the IDs of `ids`
  KEYS[3] seq        STRING commit sequence counter
  KEYS[4] res        HASH  id -> "token|expiry|possibleDuplicate"
  KEYS[5] res-exp    ZSET  id -> reservation expiry (ms)
  KEYS[6] uncertain  ZSET  id -> marker expiry (ms)

  ARGV[1] id
  ARGV[2] owner token
  ARGV[3] id-cache-size (entries kept per address)
  ARGV[4] id-cache-ttl (ms, 0 = none)
  ARGV[5] cleanup batch: most expired entries removed per call
  ARGV[6] optional: more id/token pairs, packed as in reserve-5.lua (at most 1000 IDs in all), or '' for none. One
          call commits many IDs of one address, in order, each exactly as if committed alone.
  ARGV[7] optional: idle expiry (ms, 0 or absent = none): without id-cache-ttl, the address's keys and its epoch
          marker expire after this long without a reserve or commit, so that Redis forgets addresses no one uses
          (publishers choose templated ones: docs/security.md#redis-memory). With id-cache-ttl the keys expire after it.

  Returns
  {0}      OK            recorded (or already recorded: a re-commit neither moves the ID nor adds a second entry)
  {9, msg} BAD_ARGUMENT

  The ID is recorded even when the caller's reservation was taken over meanwhile (its message was delivered), but
  another owner's live reservation is left alone: only that owner ends it.
]]
local size, ttl, batch = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local idle = tonumber(ARGV[7] or '0')
if not (size and size >= 1 and ttl and ttl >= 0 and batch and idle and idle >= 0) then return {9, 'bad numbers'} end
local PACKED_ARG = 6
--#include id-token-pairs.inc.lua

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local markers = redis.call('ZCARD', KEYS[6]) > 0
-- One read per key for the whole call and one write per key after it (see reserve-5.lua), one sequence write and
-- one eviction: the resulting state is the same as committing the IDs one call at a time.
local curs = redis.call('HMGET', KEYS[4], unpack(ids))
local ats = redis.call('HMGET', KEYS[2], unpack(ids))
local seq = tonumber(redis.call('GET', KEYS[3]) or '0')
if seq == 0 then
  -- The counter expired before the IDs (only reserves refreshed them): go on from the newest entry's sequence.
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if newest[2] then seq = tonumber(newest[2]) end
end
local first = seq
local ended, recorded = {}, {}
local endArgs, idsArgs, atArgs = {}, {}, {}
-- The commit time as text made once (the same digits Redis would make of the number): a number argument is formatted
-- again for every ID.
local nowText = string.format('%.0f', now)

for i = 1, #ids do
  local id, token = ids[i], tokens[i]
  local cur = not ended[id] and curs[i]
  if cur then
    local owner, exp = string.match(cur, '^(.*)|(%d+)|[01]$')
    if owner == token or not exp or tonumber(exp) <= now then
      ended[id] = true
      endArgs[#endArgs + 1] = id
    end
  end
  -- Recorded and not expired: a re-commit neither moves the ID nor adds a second entry. An expired one is
  -- recorded afresh, as the newest (ZADD and HSET below overwrite its old sequence and time).
  local at = ats[i]
  if not recorded[id] and not (at and (ttl == 0 or now - tonumber(at) < ttl)) then
    recorded[id] = true
    seq = seq + 1
    idsArgs[#idsArgs + 1] = seq
    idsArgs[#idsArgs + 1] = id
    atArgs[#atArgs + 1] = id
    atArgs[#atArgs + 1] = nowText
  end
end

if #endArgs > 0 then
  redis.call('HDEL', KEYS[4], unpack(endArgs))
  redis.call('ZREM', KEYS[5], unpack(endArgs))
end
if markers then redis.call('ZREM', KEYS[6], unpack(ids)) end
if seq > first then
  redis.call('ZADD', KEYS[1], unpack(idsArgs))
  redis.call('HSET', KEYS[2], unpack(atArgs))
  redis.call('SET', KEYS[3], string.format('%.0f', seq))
end
local excess = redis.call('ZCARD', KEYS[1]) - size
if excess > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], excess)
  local evicted = {}
  for k = 1, #popped, 2 do evicted[#evicted + 1] = popped[k] end
  -- In slices: unpack has a stack limit, and one call may evict many after id-cache-size was lowered.
  for k = 1, #evicted, 1000 do
    redis.call('HDEL', KEYS[2], unpack(evicted, k, math.min(k + 999, #evicted)))
  end
end

if ttl > 0 then
  --#include forget-expired-ids.inc.lua
  -- Every entry is older than the ttl once the address has been quiet that long: let the keys go.
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
elseif idle > 0 then
  redis.call('PEXPIRE', KEYS[1], idle)
  redis.call('PEXPIRE', KEYS[2], idle)
  redis.call('PEXPIRE', KEYS[3], idle)
end
-- The marker goes with the data (never before it: a marker gone under live data would read as a loss).
if idle > 0 then redis.call('PEXPIRE', epochKey, math.max(idle, ttl)) end
return {0}
