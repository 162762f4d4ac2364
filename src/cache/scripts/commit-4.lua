--[[
  commit: record an ID as forwarded to the address and end the reservation. Idempotent.

  KEYS[1] ids        ZSET   id -> commit sequence (the circular cache)
  KEYS[2] seq        STRING commit sequence counter
  KEYS[3] st         HASH   id -> its entry (st-entry.inc.lua): recorded, reserved, or both
  KEYS[4] uncertain  ZSET   id -> marker expiry (ms)

  ARGV[1] id
  ARGV[2] owner token
  ARGV[3] id-cache-size (entries kept per address)
  ARGV[4] id-cache-ttl (ms, 0 = none)
  ARGV[5] cleanup batch: most expired entries removed per call
  ARGV[6] optional: more id/token pairs, packed as in reserve-4.lua (at most 1000 IDs in all), or '' for none. One
          call commits many IDs of one address, in order, each exactly as if committed alone.
  ARGV[7] optional: idle expiry (ms, 0 or absent = none): without id-cache-ttl, the address's keys and its epoch
          marker expire after this long without a reserve or commit, so that Redis forgets addresses no one uses
          (publishers choose templated ones: docs/security.md#redis-memory). With id-cache-ttl the keys expire after it.

  Returns
  {0}      OK            recorded (or already recorded: a re-commit neither moves the ID nor adds a second entry)
  {9, msg} BAD_ARGUMENT

  The ID is recorded even when the caller's reservation was taken over meanwhile (its message was delivered), but
  another owner's live reservation is left alone: only that owner ends it (it stays in the ID's entry).
]]
local size, ttl, batch = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local idle = tonumber(ARGV[7] or '0')
if not (size and size >= 1 and ttl and ttl >= 0 and batch and idle and idle >= 0) then return {9, 'bad numbers'} end
local PACKED_ARG = 6
--#include id-token-pairs.inc.lua
--#include st-entry.inc.lua
local idsKey, stKey = KEYS[1], KEYS[3]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local markers = redis.call('ZCARD', KEYS[4]) > 0
-- One read for the whole call and one write after it (see reserve-4.lua), one sequence write and one eviction: the
-- resulting state is the same as committing the IDs one call at a time.
local curs = redis.call('HMGET', stKey, unpack(ids))
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
if seq == 0 then
  -- The counter expired before the IDs (only reserves refreshed them): go on from the newest entry's sequence.
  local newest = redis.call('ZRANGE', idsKey, -1, -1, 'WITHSCORES')
  if newest[2] then seq = tonumber(newest[2]) end
end
local first = seq
local state, touched = {}, {}
local idsArgs = {}
-- The commit time as text made once (the same digits Redis would make of the number): a number argument is formatted
-- again for every ID.
local nowText = string.format('%.0f', now)

for i = 1, #ids do
  local id, token = ids[i], tokens[i]
  local cur = state[id]
  if cur == nil then cur = curs[i] end
  local at, atText, res = readEntry(cur)
  -- The caller's own reservation ends, and so does an expired one; another owner's live one stays.
  if res then
    local owner, exp = string.match(res, '^(.*)|(%d+)|[01]$')
    if owner == token or not exp or tonumber(exp) <= now then res = nil end
  end
  -- Recorded and not expired: a re-commit neither moves the ID nor adds a second entry. An expired one is
  -- recorded afresh, as the newest (ZADD below overwrites its old sequence).
  if not (at and (ttl == 0 or now - at < ttl)) then
    seq = seq + 1
    idsArgs[#idsArgs + 1] = seq
    idsArgs[#idsArgs + 1] = id
    atText = nowText
  end
  local v = makeEntry(atText, res)
  if v ~= cur then
    if state[id] == nil then touched[#touched + 1] = id end
    state[id] = v
  end
end

if #touched > 0 then
  local setArgs = {}
  for _, id in ipairs(touched) do
    setArgs[#setArgs + 1] = id
    setArgs[#setArgs + 1] = state[id]
  end
  redis.call('HSET', stKey, unpack(setArgs))
end
if markers then redis.call('ZREM', KEYS[4], unpack(ids)) end
if seq > first then
  redis.call('ZADD', idsKey, unpack(idsArgs))
  redis.call('SET', KEYS[2], string.format('%.0f', seq))
end
local excess = redis.call('ZCARD', idsKey) - size
if excess > 0 then
  local popped = redis.call('ZPOPMIN', idsKey, excess)
  local evicted = {}
  for k = 1, #popped, 2 do evicted[#evicted + 1] = popped[k] end
  -- In slices: unpack has a stack limit, and one call may evict many after id-cache-size was lowered. An evicted ID's
  -- entry goes, unless another owner's reservation shares it (it then stays, as a reservation).
  for k = 1, #evicted, 1000 do
    local slice = { unpack(evicted, k, math.min(k + 999, #evicted)) }
    local vals = redis.call('HMGET', stKey, unpack(slice))
    local gone, kept = {}, {}
    for j = 1, #slice do
      local v = vals[j]
      -- A plain record has no '|' (a plain find, not a pattern: this runs for every evicted ID).
      if v and string.find(v, '|', 1, true) then
        local _, _, res = readEntry(v)
        kept[#kept + 1] = slice[j]
        kept[#kept + 1] = makeEntry(nil, res)
      else
        gone[#gone + 1] = slice[j]
      end
    end
    if #gone > 0 then redis.call('HDEL', stKey, unpack(gone)) end
    if #kept > 0 then redis.call('HSET', stKey, unpack(kept)) end
  end
end

if ttl > 0 then
  --#include forget-expired-ids.inc.lua
  -- Every entry is older than the ttl once the address has been quiet that long: let the keys go.
  redis.call('PEXPIRE', idsKey, ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  -- `st` also holds reservations: a reserve may have given it longer, for a lease (see reserve-4.lua); never shorter.
  if redis.call('PTTL', stKey) < ttl then redis.call('PEXPIRE', stKey, ttl) end
elseif idle > 0 then
  redis.call('PEXPIRE', idsKey, idle)
  redis.call('PEXPIRE', stKey, idle)
  redis.call('PEXPIRE', KEYS[2], idle)
end
-- The marker goes with the data (never before it: a marker gone under live data would read as a loss).
if idle > 0 then redis.call('PEXPIRE', epochKey, math.max(idle, ttl)) end
return {0}
