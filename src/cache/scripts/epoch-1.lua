--[[
  epoch: reads, creates or extends the epoch marker of one hash tag (a target address's cache, or a source's stamp
  records). The marker is what every other script checks first (epoch-guard.inc.lua): it outlives the data it vouches
  for (no TTL, or a target address's idle expiry, which reserve and commit refresh with the data's), so a cache that
  lost its data also lost its marker. Not guarded itself.

  KEYS[1] epoch  HASH v = "<generation>:<flag-until ms, Redis clock>" (and m while layout 1's keys are moved)

  ARGV[1] a new generation (random) to write when there is no marker
  ARGV[2] flag window (ms): copies the cache cannot vouch for are flagged until now + this
  ARGV[3] 1 = extend the flag window of an existing marker to now + window (the caller saw the serving Redis change,
          so the latest writes may be lost); 0 = leave an existing marker as it is
  ARGV[4] optional: expiry (ms, 0 or absent = none) of a marker this call creates: a target address's marker goes
          with its keys when the address is idle (commit-4.lua ARGV[7]); a source's stamp marker never expires

  Returns
  {0, value, run_id, now, created (1 or 0)}  OK
  {9, msg}                                   BAD_ARGUMENT

  A layout-1 marker (a string) becomes a hash with the same value and expiry, and m set: the tag's layout-1 keys are
  then moved (migrate-5.lua) before any guarded script runs on it.
]]
local window, extend = tonumber(ARGV[2]), ARGV[3] == '1'
if not (ARGV[1] ~= '' and window and window >= 0) then return {9, 'bad arguments'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local server = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or '?'
local flagUntil = string.format('%.0f', now + window)
local kind = redis.call('TYPE', KEYS[1])['ok']
local value
if kind == 'string' then
  value = redis.call('GET', KEYS[1])
  local pttl = redis.call('PTTL', KEYS[1])
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'v', value, 'm', '1')
  if pttl > 0 then redis.call('PEXPIRE', KEYS[1], pttl) end
elseif kind == 'hash' then
  value = redis.call('HGET', KEYS[1], 'v')
end
if not value then
  value = ARGV[1] .. ':' .. flagUntil
  redis.call('HSET', KEYS[1], 'v', value)
  local expiry = tonumber(ARGV[4] or '0') or 0
  if expiry > 0 then redis.call('PEXPIRE', KEYS[1], expiry) end
  return {0, value, server, now, 1}
end
if extend then
  local generation, old = string.match(value, '^(.*):(%d+)$')
  if generation and tonumber(old) < now + window then
    value = generation .. ':' .. flagUntil
    -- HSET keeps the key's expiry.
    redis.call('HSET', KEYS[1], 'v', value)
  end
end
return {0, value, server, now, 0}
