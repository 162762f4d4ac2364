--[[
  Included by the stamp-* scripts (see withIncludes in script-loader.ts).

  A stamp entry is "owner|leaseExpiry" or "owner|leaseExpiry|mark". An empty owner (or an expired lease) means free
  to claim. Marks:
  d  done: the message the stamp stands for was handled: its ID is recorded at the target (learned by a claimer that
     asked the target's cache) or the message was dead-lettered. No claim takes a done stamp.
  f  flagged: the stamp was made for a redelivery that may be a copy of a message already forwarded under another ID,
     so every copy forwarded under it carries the possible-duplicate flag, whoever forwards it.
  u  done, ack unknown: handled as `d`, and its message acked, but the session ended before the ack was known to have
     reached the broker (stamp-release-1.lua). Done for every rule but rule 3: a redelivery is never dropped under it,
     since the message may be gone from the broker and the redelivery its byte-identical twin.
]]

-- The entry value with a new owner and lease expiry, its mark kept.
local function stampValue(owner, expiry, mark)
  local v = owner .. '|' .. string.format('%.0f', expiry)
  if mark ~= nil and mark ~= '' then v = v .. '|' .. mark end
  return v
end
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
