--[[
  recorded: which of these IDs are recorded (forwarded and committed, not expired) for one target address. Read-only;
  used when a redelivered message chooses among the stamps of its fingerprint (stamp-claim-1.lua).

  KEYS[1] ids  ZSET id -> commit sequence (the circular cache)
  KEYS[2] at   HASH id -> commit time (ms, Redis clock)

  ARGV[1] id-cache-ttl (ms, 0 = none)
  ARGV[2 ..] IDs

  Returns one character per ID, in order, as one string: 1 recorded, 0 not; or {9, msg} BAD_ARGUMENT
]]
local ttl = tonumber(ARGV[1])
if not (ttl and ttl >= 0) then return {9, 'bad numbers'} end
if #ARGV < 2 then return '' end
local now = 0
if ttl > 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local out = {}
for i = 2, #ARGV do
  local recorded = redis.call('ZSCORE', KEYS[1], ARGV[i]) ~= false
  if recorded and ttl > 0 then
    local at = tonumber(redis.call('HGET', KEYS[2], ARGV[i]))
    recorded = at ~= nil and now - at < ttl
  end
  out[#out + 1] = recorded and '1' or '0'
end
return table.concat(out)
