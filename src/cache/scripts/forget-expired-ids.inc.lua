--[[
  Included by reserve-5.lua and commit-6.lua, inside their `if ttl > 0` (see withIncludes in script-loader.ts).

  Forgets up to `batch` recorded IDs older than `ttl`, oldest first, from `ids` (KEYS[1]) and `at` (KEYS[2]). Sequence
  order is commit order, so the oldest entries come first; it stops at the first one still young.
]]
local oldest = redis.call('ZRANGE', KEYS[1], 0, batch - 1)
for _, o in ipairs(oldest) do
  local at = tonumber(redis.call('HGET', KEYS[2], o))
  if at and now - at < ttl then break end
  redis.call('ZREM', KEYS[1], o)
  redis.call('HDEL', KEYS[2], o)
end
