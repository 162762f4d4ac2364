--[[
  Included by reserve-4.lua and commit-4.lua (loadScripts in script-loader.ts inlines it where a script says
  `--#include id-token-pairs.inc.lua`; a script sent to Redis is one self-contained chunk).

  Reads the id/token pairs of a call into `ids` and `tokens`: the first pair from ARGV[1] and ARGV[2], the others from
  ARGV[PACKED_ARG] (set by the including script) when present and not empty, packed as MessagePack: the number of pairs, the array
  of their IDs, the array of their tokens. One argument instead of two per ID keeps encoding the command cheap for the
  client, and Redis's cmsgpack decodes it in C (see packPairs in address-batcher.ts). Returns BAD_ARGUMENT for the
  whole call when the packed pairs are malformed, a token is empty or the call holds more than MAX_IDS IDs.
]]
local MAX_IDS = 1000
if ARGV[1] == nil then return {9, 'no id'} end
local ids, tokens = {ARGV[1]}, {ARGV[2]}
local packed = ARGV[PACKED_ARG]
if packed and packed ~= '' then
  -- Decoded in C: a parse of the pairs in Lua cost about as much as the rest of a reserve per ID. A malformed
  -- argument makes cmsgpack raise an error, caught here.
  local ok, count, moreIds, moreTokens = pcall(cmsgpack.unpack, packed)
  if not (ok and type(count) == 'number' and type(moreIds) == 'table' and type(moreTokens) == 'table') then
    return {9, 'malformed packed id/token pairs'}
  end
  -- Bounded: the IDs are passed to single commands with unpack(), whose stack is limited.
  if count + 1 > MAX_IDS then return {9, 'more than ' .. MAX_IDS .. ' IDs in one call'} end
  -- The count, not the length operator, says how many: an array with a hole (a nil) has no reliable length.
  if count < 1 or count ~= math.floor(count) or #moreIds ~= count or #moreTokens ~= count then
    return {9, 'malformed packed id/token pairs'}
  end
  for i = 1, count do
    local id, token = moreIds[i], moreTokens[i]
    if type(id) ~= 'string' or type(token) ~= 'string' then return {9, 'malformed packed id/token pairs'} end
    ids[i + 1] = id
    tokens[i + 1] = token
  end
end
for i = 1, #ids do
  if tokens[i] == nil or tokens[i] == '' then return {9, 'empty token'} end
end
