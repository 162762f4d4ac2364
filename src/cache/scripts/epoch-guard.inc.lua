--[[
  epoch guard: the loader puts this in front of every cache script but epoch-1.lua (see script-loader.ts), so that no
  script reads or writes a cache it cannot vouch for. It takes its key and argument off the front of KEYS and ARGV;
  the script after it sees its own KEYS and ARGV as documented in its header.

  KEYS[1] epoch  STRING "<generation>:<flag-until ms>" of this hash tag (see epoch-1.lua); same hash tag as the others
  ARGV[1] what the caller last saw: "<epoch value>|<run_id of the Redis server that answered>"

  Returns {8, "<epoch value or ''>|<run_id>"} (EPOCH_CHANGED) and does nothing when they differ: the cache data may
  have been lost (no epoch: a restart without persistence, a flush, an eviction), replaced (another generation), or
  served by another server (run_id: a restart, a failover, a slot migration) since the caller last looked.
]]
local epochKey = table.remove(KEYS, 1)
local epochSeen = table.remove(ARGV, 1)
do
  local server = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or '?'
  local now = (redis.call('GET', epochKey) or '') .. '|' .. server
  if now ~= epochSeen then return {8, now} end
end
