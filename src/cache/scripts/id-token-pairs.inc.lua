--[[
  Included by reserve-5.lua and commit-6.lua (loadScripts in script-loader.ts inlines it where a script says
  `--#include id-token-pairs.inc.lua`; a script sent to Redis is one self-contained chunk).

  Reads the id/token pairs of a call into `ids` and `tokens`: the first pair from ARGV[1] and ARGV[2], the others from
  ARGV[PACKED_ARG] (set by the including script) when present, packed as `<bytes>:<id><bytes>:<token>` repeated: one
  argument instead of two per ID keeps encoding the command cheap for the client (see packPairs in
  address-batcher.ts). Returns BAD_ARGUMENT for the whole call when a pair is malformed, a token is empty or the call
  holds more than MAX_IDS IDs.
]]
local MAX_IDS = 1000
if ARGV[1] == nil then return {9, 'no id'} end
local ids, tokens = {ARGV[1]}, {ARGV[2]}
local packed = ARGV[PACKED_ARG]
if packed then
  local pos, n = 1, #packed
  local function field()
    local colon = string.find(packed, ':', pos, true)
    local len = colon and tonumber(string.sub(packed, pos, colon - 1))
    -- A whole, non-negative length that stays inside the string (so that the parse always moves forward).
    if not len or len < 0 or len ~= math.floor(len) or colon + len > n then return nil end
    pos = colon + len + 1
    return string.sub(packed, colon + 1, colon + len)
  end
  while pos <= n do
    local id = field()
    local token = id and field()
    if not token then return {9, 'malformed packed id/token pairs'} end
    ids[#ids + 1] = id
    tokens[#tokens + 1] = token
    -- Bounded: the IDs are passed to single commands with unpack(), whose stack is limited.
    if #ids > MAX_IDS then return {9, 'more than ' .. MAX_IDS .. ' IDs in one call'} end
  end
end
for i = 1, #ids do
  if tokens[i] == nil or tokens[i] == '' then return {9, 'empty token'} end
end
