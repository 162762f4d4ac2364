--[[
  Included by the stamp-* scripts (see withIncludes in redis-id-cache.ts).

  A stamp entry is "owner|leaseExpiry" or "owner|leaseExpiry|d". An empty owner (or an expired lease) means free to
  claim. The mark `d` (done) says that the message the stamp stands for was handled: its ID is recorded at the target
  (learned by a claimer that asked the target's cache) or the message was dead-lettered. No claim takes a done stamp.
]]
local function parseStamp(value)
  local owner, exp, mark = string.match(value, '^(.*)|(%d+)|(%a)$')
  if owner == nil then
    owner, exp = string.match(value, '^(.*)|(%d+)$')
    mark = ''
  end
  return owner, tonumber(exp), mark
end

-- The entry `id` of KEYS[1] when `token` holds it: owner, lease expiry, mark; nil otherwise (NOT_OWNER).
local function ownStamp(id, token)
  local cur = redis.call('HGET', KEYS[1], id)
  if not cur then return nil end
  local owner, exp, mark = parseStamp(cur)
  if owner ~= token then return nil end
  return owner, exp, mark
end
