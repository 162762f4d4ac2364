--[[
  commit: record an ID as forwarded to the address and end the reservation. Idempotent.

  KEYS[1] ids        ZSET  id -> commit sequence (the circular cache)
  KEYS[2] at         HASH  id -> commit time (ms, Redis clock)
  KEYS[3] seq        STRING commit sequence counter
  KEYS[4] res        HASH  id -> "token|expiry|possibleDuplicate"
  KEYS[5] res-exp    ZSET  id -> reservation expiry (ms)
  KEYS[6] uncertain  ZSET  id -> marker expiry (ms)

  ARGV[1] id
  ARGV[2] owner token
  (ARGV[3..5] as below; then optionally more id, token pairs from ARGV[6] on: one call commits many IDs of one
  address, in order, each exactly as if committed alone)
  ARGV[3] id-cache-size (entries kept per address)
  ARGV[4] id-cache-ttl (ms, 0 = none)
  ARGV[5] cleanup batch: most expired entries removed per call

  Returns
  {0}      OK            recorded (or already recorded: a re-commit neither moves the ID nor adds a second entry)
  {9, msg} BAD_ARGUMENT

  The ID is recorded even when the caller's reservation was taken over meanwhile (its message was delivered), but
  another owner's live reservation is left alone: only that owner ends it.
]]
local size, ttl, batch = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not (size and size >= 1 and ttl and ttl >= 0 and batch) then return {9, 'bad numbers'} end
local items = {{ARGV[1], ARGV[2]}}
for i = 6, #ARGV - 1, 2 do items[#items + 1] = {ARGV[i], ARGV[i + 1]} end
for _, it in ipairs(items) do
  if it[2] == nil or it[2] == '' then return {9, 'empty token'} end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local markers = redis.call('ZCARD', KEYS[6]) > 0
-- One sequence read and write per call, and one eviction after all commits: the resulting set is the same as
-- evicting after every commit (the oldest entries by sequence go first).
local seq = tonumber(redis.call('GET', KEYS[3]) or '0')
local first = seq

local function commit(id, token)
  local cur = redis.call('HGET', KEYS[4], id)
  if cur then
    local owner, exp = string.match(cur, '^(.*)|(%d+)|[01]$')
    if owner == token or not exp or tonumber(exp) <= now then
      redis.call('HDEL', KEYS[4], id)
      redis.call('ZREM', KEYS[5], id)
    end
  end
  if markers then redis.call('ZREM', KEYS[6], id) end

  if redis.call('ZSCORE', KEYS[1], id) then
    local at = tonumber(redis.call('HGET', KEYS[2], id))
    if ttl == 0 or (at and now - at < ttl) then return end
    -- Expired entries count as absent: record it afresh, as the newest.
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
  end

  seq = seq + 1
  redis.call('ZADD', KEYS[1], seq, id)
  redis.call('HSET', KEYS[2], id, now)
end

for _, it in ipairs(items) do commit(it[1], it[2]) end
if seq > first then redis.call('SET', KEYS[3], string.format('%.0f', seq)) end
local excess = redis.call('ZCARD', KEYS[1]) - size
if excess > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], excess)
  for i = 1, #popped, 2 do redis.call('HDEL', KEYS[2], popped[i]) end
end

if ttl > 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, batch - 1)
  for _, o in ipairs(oldest) do
    local at = tonumber(redis.call('HGET', KEYS[2], o))
    if at and now - at < ttl then break end
    redis.call('ZREM', KEYS[1], o)
    redis.call('HDEL', KEYS[2], o)
  end
  -- Every entry is older than the ttl once the address has been quiet that long: let the keys go.
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return {0}
