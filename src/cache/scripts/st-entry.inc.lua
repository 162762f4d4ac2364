--[[
  Included by reserve-4.lua, commit-4.lua, release-2.lua, migrate-5.lua and forget-expired-ids.inc.lua: reads and
  makes one field of an address's `st` hash, the one entry per ID of the cache's layout 2 (docs/design.md §4.2):
    c<time>                        recorded at <time> (ms, Redis clock)
    c<time>|<token>|<expiry>|<pd>  recorded, and another owner's reservation that the commit left alone (only that owner
                                   ends it, see commit-4.lua; rare: a takeover, then the first owner's late commit)
    r<token>|<expiry>|<pd>         reserved
  A reservation's part is what layout 1's `res` hash held for the ID, so the same pattern reads it.
]]
-- The commit time (a number, or nil when not recorded), its digits, and the reservation part (a string, or nil).
local function readEntry(v)
  if not v then return nil, nil, nil end
  if string.byte(v, 1) == 99 then -- 'c'
    local at, rest = string.match(v, '^c(%d+)(.*)$')
    if rest == '' then return tonumber(at), at, nil end
    return tonumber(at), at, string.sub(rest, 2)
  end
  return nil, nil, string.sub(v, 2)
end

-- The entry for a commit time's digits and a reservation part (either may be nil); false when both are.
local function makeEntry(atText, res)
  if atText then
    if res then return 'c' .. atText .. '|' .. res end
    return 'c' .. atText
  end
  if res then return 'r' .. res end
  return false
end
