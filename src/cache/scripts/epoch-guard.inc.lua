--[[
  epoch guard: the loader puts this in front of every cache script but epoch-1.lua and migrate-5.lua (see
  script-loader.ts), so that no script reads or writes a cache it cannot vouch for. It takes its key and argument off
  the front of KEYS and ARGV; the script after it sees its own KEYS and ARGV as documented in its header.

  KEYS[1] epoch  HASH v = "<generation>:<flag-until ms>" of this hash tag (see epoch-1.lua), and m while layout 1's
                 keys of the tag are being moved (migrate-5.lua); same hash tag as the others
  ARGV[1] what the caller last saw: "<epoch value>|<run_id of the Redis server that answered>"

  Returns {8, "<epoch value or ''>|<run_id>"} (EPOCH_CHANGED) and does nothing when they differ: the cache data may
  have been lost (no epoch: a restart without persistence, a flush, an eviction), replaced (another generation), or
  served by another server (run_id: a restart, a failover, a slot migration) since the caller last looked.
  Returns {10} (OLD_LAYOUT) and does nothing while the tag's data is (partly) in layout 1: a marker that is still a
  string (written by a build of layout 1), or one with m set. The caller runs migrate-5.lua until it is done.

  Why a hash: every script of a layout-1 build reads the marker with GET first, which fails (WRONGTYPE) on a hash
  before the script writes anything; so a process of the old build started later (a rollback, a forgotten host) cannot
  answer from keys it no longer understands (docs/operations.md#upgrading-the-cache-layout).
]]
local epochKey = table.remove(KEYS, 1)
local epochSeen = table.remove(ARGV, 1)
do
  local e = redis.pcall('HMGET', epochKey, 'v', 'm')
  if e.err or e[2] then return {10} end
  local server = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or '?'
  local now = (e[1] or '') .. '|' .. server
  if now ~= epochSeen then return {8, now} end
end
