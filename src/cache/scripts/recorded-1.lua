--[[
  recorded: which of these IDs are recorded (forwarded and committed, not expired) for one target address. Read-only;
  used when a redelivered message chooses among the stamps of its fingerprint (stamp-claim-1.lua).

  KEYS[1] st  HASH id -> its entry (st-entry.inc.lua): "c<time>…" once recorded

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
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  local at = v and string.byte(v, 1) == 99 and tonumber(string.match(v, '^c(%d+)'))
  out[#out + 1] = (at and (ttl == 0 or now - at < ttl)) and '1' or '0'
end
return table.concat(out)
