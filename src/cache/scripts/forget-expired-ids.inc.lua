--[[
  Included by reserve-4.lua and commit-4.lua, inside their `if ttl > 0` (see withIncludes in script-loader.ts), after
  st-entry.inc.lua; the including script sets `idsKey` and `stKey`.

  Forgets up to `batch` recorded IDs older than `ttl`, oldest first, from `ids` and `st`. Sequence order is commit
  order, so the oldest entries come first; it stops at the first one still young. A reservation that shares the ID's
  entry stays (only its owner or its expiry ends it).
]]
local oldest = redis.call('ZRANGE', idsKey, 0, batch - 1)
for _, o in ipairs(oldest) do
  local at, _, res = readEntry(redis.call('HGET', stKey, o))
  if at and now - at < ttl then break end
  redis.call('ZREM', idsKey, o)
  local left = makeEntry(nil, res)
  if left then redis.call('HSET', stKey, o, left) else redis.call('HDEL', stKey, o) end
end
