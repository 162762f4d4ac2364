--[[
  migrate: moves one slice of a hash tag's layout-1 keys into layout 2 (docs/operations.md "Upgrading the cache
  layout"). Called by RedisIdCache when the epoch guard answered OLD_LAYOUT, again and again until it answers done;
  each call is atomic, so a tag is either in layout 1, moving (the guard turns every other script away meanwhile), or in
  layout 2. Not guarded itself: it is what makes the guard pass.

  KEYS[1] epoch    the tag's marker: a string in layout 1, a hash in layout 2 (see epoch-guard.inc.lua)
  KEYS[2] at       layout 1: HASH id -> commit time
  KEYS[3] res      layout 1: HASH id -> "token|expiry|possibleDuplicate"
  KEYS[4] res-exp  layout 1: ZSET id -> reservation expiry
  KEYS[5] st       layout 2: HASH id -> entry (st-entry.inc.lua)
  (`ids`, `seq` and `uncertain` mean the same in both layouts and stay where they are: the commit order, the times and
  the markers are kept as they were.)

  ARGV[1] most entries moved per call (bounded work: id-cache-size may be large)

  Returns {0, 1} done (nothing of layout 1 is left; the marker's m is cleared), {0, 0} call again, or {9, msg}.
  A marker that is missing leaves nothing to vouch for: done (the epoch's first contact takes over from there).
]]
--#include st-entry.inc.lua

local n = tonumber(ARGV[1])
if not (n and n >= 1 and n <= 1000) then return {9, 'bad numbers'} end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then
  local value = redis.call('GET', KEYS[1])
  local pttl = redis.call('PTTL', KEYS[1])
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'v', value, 'm', '1')
  if pttl > 0 then redis.call('PEXPIRE', KEYS[1], pttl) end
elseif kind ~= 'hash' then
  return {0, 1}
end
if redis.call('HEXISTS', KEYS[1], 'm') == 0 then return {0, 1} end

-- The new hash's expiry is the old one's: the recorded IDs' (idle or ttl expiry, or none), else the reservations'.
if redis.call('EXISTS', KEYS[5]) == 0 then
  local pttl = redis.call('PTTL', KEYS[2])
  if pttl == -2 then pttl = redis.call('PTTL', KEYS[3]) end
  if pttl > 0 then
    -- A placeholder field, so that the key exists to carry the expiry; replaced or removed below.
    redis.call('HSET', KEYS[5], '\0', '')
    redis.call('PEXPIRE', KEYS[5], pttl)
  end
end

-- Reservations first: a recorded ID's reservation is then in its entry when its record moves in.
local res = redis.call('HRANDFIELD', KEYS[3], n, 'WITHVALUES')
if #res > 0 then
  local setArgs, moved = {}, {}
  for j = 1, #res, 2 do
    moved[#moved + 1] = res[j]
    setArgs[#setArgs + 1] = res[j]
    setArgs[#setArgs + 1] = 'r' .. res[j + 1]
  end
  redis.call('HSET', KEYS[5], unpack(setArgs))
  redis.call('HDEL', KEYS[3], unpack(moved))
  redis.call('HDEL', KEYS[5], '\0')
  return {0, 0}
end
redis.call('DEL', KEYS[4])

local at = redis.call('HRANDFIELD', KEYS[2], n, 'WITHVALUES')
if #at > 0 then
  local moved = {}
  for j = 1, #at, 2 do moved[#moved + 1] = at[j] end
  local curs = redis.call('HMGET', KEYS[5], unpack(moved))
  local setArgs = {}
  for j = 1, #moved do
    -- A reservation moved in above stays in the entry: recorded, and the reservation left alone by the commit.
    local _, _, reservation = readEntry(curs[j])
    setArgs[#setArgs + 1] = moved[j]
    setArgs[#setArgs + 1] = makeEntry(at[2 * j], reservation)
  end
  redis.call('HSET', KEYS[5], unpack(setArgs))
  redis.call('HDEL', KEYS[2], unpack(moved))
  redis.call('HDEL', KEYS[5], '\0')
  return {0, 0}
end
redis.call('HDEL', KEYS[5], '\0')
redis.call('HDEL', KEYS[1], 'm')
return {0, 1}
