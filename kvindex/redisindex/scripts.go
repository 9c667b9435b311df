package redisindex

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the server, so replicas calling
// them concurrently never see or leave a half-applied update. Block hashes
// and keys travel as 8-byte big-endian strings, a whole chain packed into
// one argument.

// prefixMatchScript finds, for each endpoint, how many consecutive blocks of
// the chain from block 0 it holds. KEYS: the endpoints' sorted sets; ARGV[1]:
// the chain. An endpoint's held blocks are closed under prefixes (see
// prefixAddScript), so the count is found by lookups of single blocks: block
// 0 (an endpoint without it is done), the last block (one that holds the
// whole chain is done), then galloping and bisecting in between, about
// 2·log₂(count) more.
var prefixMatchScript = redis.NewScript(prefixMatchSrc)

const prefixMatchSrc = `
local chain = ARGV[1]
local n = #chain / 8
local out = {}
for e = 1, #KEYS do
  local k = KEYS[e]
  local function held(d)
    return redis.call('ZSCORE', k, string.sub(chain, d * 8 + 1, d * 8 + 8))
  end
  local m = 0
  if n > 0 and held(0) then
    local lo, hi, step = 0, n - 1, 1
    if n == 1 or held(n - 1) then lo, hi = n - 1, n end
    while lo + step < hi do
      if held(lo + step) then
        lo = lo + step
        step = step * 2
      else
        hi = lo + step
      end
    end
    while hi - lo > 1 do
      local mid = math.floor((lo + hi) / 2)
      if held(mid) then lo = mid else hi = mid end
    end
    m = lo + 1
  end
  out[e] = m
end
return out
`

// prefixAddScript credits an endpoint with one or more chains, as if added
// one after the other. KEYS[1]: its sorted set; KEYS[2]: the capacity hash.
// ARGV: endpoint, capacity (0: the stored one, else the default), default
// capacity, TTL in ms (0: none), the number of chains, then for each chain
// j: the depth s of its first block sent (the blocks before it are credited
// by a later chain), the number of blocks sent, and their hashes, one
// argument each. A chain's blocks past the capacity are not credited.
//
// A block's score is (seq + j)·65536 + (65535 − depth), seq one more than
// the newest Add's: a newer Add outranks every older one, and within one
// Add a block outranks the blocks after it. Every Add credits a chain from
// block 0, so a held block's parent always scores higher than the block;
// trimming the lowest scores therefore evicts least recently used prefixes,
// tails first, and leaves what an endpoint holds closed under prefixes, as
// kvindex.PrefixIndex does. seq needs no counter: it is read from the set's
// top score.
var prefixAddScript = redis.NewScript(prefixAddSrc)

const prefixAddSrc = `
local set, caps = KEYS[1], KEYS[2]
local cap = tonumber(ARGV[2])
if cap <= 0 then cap = tonumber(redis.call('HGET', caps, ARGV[1]) or ARGV[3]) end
local D = 65536
local top = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')
local seq = 1
if top[2] then seq = math.floor(tonumber(top[2]) / D) + 1 end
local args = {}
local i = 6
for j = 0, tonumber(ARGV[5]) - 1 do
  local s, k = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  local base = (seq + j) * D + D - 1
  for d = s, math.min(s + k, cap) - 1 do
    args[#args + 1] = base - d
    args[#args + 1] = ARGV[i + 2 + d - s]
    if #args >= 1000 then
      redis.call('ZADD', set, unpack(args))
      args = {}
    end
  end
  i = i + 2 + k
end
if #args > 0 then redis.call('ZADD', set, unpack(args)) end
local size = redis.call('ZCARD', set)
if size > cap then
  redis.call('ZREMRANGEBYRANK', set, 0, size - cap - 1)
  size = cap
end
local ttl = tonumber(ARGV[4])
if ttl > 0 and size > 0 then redis.call('PEXPIRE', set, ttl) end
return size
`

// prefixCapacityScript sets an endpoint's capacity and trims its set to
// it. KEYS[1]: the sorted set; KEYS[2]: the capacity hash. ARGV: endpoint,
// capacity (0: back to the default), default capacity, TTL in ms.
var prefixCapacityScript = redis.NewScript(prefixCapacitySrc)

const prefixCapacitySrc = `
local set, caps = KEYS[1], KEYS[2]
local cap = tonumber(ARGV[2])
if cap <= 0 then
  redis.call('HDEL', caps, ARGV[1])
  cap = tonumber(ARGV[3])
else
  redis.call('HSET', caps, ARGV[1], cap)
  local ttl = tonumber(ARGV[4])
  if ttl > 0 then redis.call('PEXPIRE', caps, ttl) end
end
local size = redis.call('ZCARD', set)
if size > cap then redis.call('ZREMRANGEBYRANK', set, 0, size - cap - 1) end
return 0
`

// prefixRemoveScript forgets an endpoint. KEYS[1]: its sorted set; KEYS[2]:
// the capacity hash. ARGV[1]: the endpoint.
var prefixRemoveScript = redis.NewScript(prefixRemoveSrc)

const prefixRemoveSrc = `
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 0
`

// eventMatchScript finds, for each endpoint, the consecutive blocks of the
// request's keys from block 0 it holds, per best tier. KEYS: each
// endpoint's GPU set then its CPU set; ARGV: the keys, one argument each
// (the script passes ranges of them to the server as they are: cutting a
// packed string would cost the server more). It returns the GPU and CPU
// counts of each endpoint in turn. An endpoint's blocks are looked up in growing
// chunks (16, 64, 256, 1024), so one that holds little costs one lookup;
// its CPU set is read only for blocks not on the GPU.
var eventMatchScript = redis.NewScript(eventMatchSrc)

const eventMatchSrc = `
local ks, n = ARGV, #ARGV
local out = {}
for e = 1, #KEYS / 2 do
  local gset, cset = KEYS[2 * e - 1], KEYS[2 * e]
  local g, c = 0, 0
  local i, size, done = 1, 16, false
  while i <= n and not done do
    local j = math.min(n, i + size - 1)
    local on = redis.call('SMISMEMBER', gset, unpack(ks, i, j))
    local off = {}
    for t = 1, #on do
      if on[t] == 0 then off[#off + 1] = ks[i + t - 1] end
    end
    local cpu = {}
    if #off > 0 then cpu = redis.call('SMISMEMBER', cset, unpack(off)) end
    local o = 0
    for t = 1, #on do
      if on[t] == 1 then
        g = g + 1
      else
        o = o + 1
        if cpu[o] ~= 1 then
          done = true
          break
        end
        c = c + 1
      end
    end
    i = j + 1
    if size < 1024 then size = size * 4 end
  end
  out[2 * e - 1] = g
  out[2 * e] = c
end
return out
`

// eventApplyScript applies one batch of an endpoint's events. KEYS[1] and
// KEYS[2]: the endpoint's GPU and CPU sets of block keys; KEYS[3]: its
// mappings (engine hash → block key, plus the field "seq": the last batch
// applied); KEYS[4]: the set of base models (exact keys). ARGV: the batch's
// sequence number (20 digits), TTL in ms, the endpoint's entry limit, a
// model to add to the base models ("" none), then each operation: code,
// tier (1 GPU, 2 CPU), count n, and its items, 8-byte hashes or keys, one
// argument each (the script passes ranges of ARGV to the server as they
// are: building tables costs the interpreter more than the server spends
// on the commands):
//
//	S  store: n keys, then n (engine hash, key) pairs; holds and maps them
//	K  store by key (exact keys): n keys
//	M  tier move: n engine hashes of known blocks
//	R  remove: n engine hashes
//	D  remove by key (exact keys): n keys
//	C  clear: everything the endpoint holds (n = 0)
//
// A batch older than the last one applied — a replica lagging behind
// another that follows the same engine — is skipped whole (returns {-1}):
// it would undo newer events. Applying a batch again changes nothing. It
// returns the counts stored, removed, unknown removes, unresolved moves and
// refused (entry limit).
var eventApplyScript = redis.NewScript(eventApplySrc)

const eventApplySrc = `
local sets, map = {KEYS[1], KEYS[2]}, KEYS[3]
local last = redis.call('HGET', map, 'seq')
if last and ARGV[1] < last then return {-1} end
local maxn = tonumber(ARGV[3])
local stored, removed, unknown, unresolved, full = 0, 0, 0, 0, 0
-- Each key gets a member (field) longer than any server keeps in a compact
-- set or hash (set- and hash-max-listpack-value, 64 by default): they are
-- real hash tables from their first entry, and a lookup costs the same
-- whatever their size (a compact one is searched end to end).
local pad = string.rep('-', 200)

-- call runs cmd on key with t[i..j] as arguments, in chunks the
-- interpreter can pass, and returns the replies (of the last chunk when
-- they are not lists).
local function call(cmd, key, t, i, j)
  if j < i then return {} end
  if j - i < 1000 then return redis.call(cmd, key, unpack(t, i, j)) end
  local out = {}
  for s = i, j, 1000 do
    local r = redis.call(cmd, key, unpack(t, s, math.min(j, s + 999)))
    if type(r) ~= 'table' then out = r else
      for x = 1, #r do out[#out + 1] = r[x] end
    end
  end
  return out
end
-- hold adds t[i..i+n-1] to tier set bit, within the entry limit; it
-- returns how many (from the first) it took.
local function hold(t, i, n, bit)
  if n == 0 then return 0 end
  if redis.call('SADD', sets[bit], pad) == 1 then redis.call('SADD', sets[3 - bit], pad) end
  local size = redis.call('SCARD', sets[1]) + redis.call('SCARD', sets[2]) - 2
  if size + n > maxn then
    local room = math.max(0, maxn - size)
    full = full + n - room
    n = room
  end
  call('SADD', sets[bit], t, i, i + n - 1)
  stored = stored + n
  return n
end
-- release removes keys from tier set bit; hashes[x], when given, names
-- keys[x] and is unmapped once the endpoint holds the block in no tier.
local function release(keys, hashes, bit)
  if #keys == 0 then return end
  local had = call('SMISMEMBER', sets[bit], keys, 1, #keys)
  local gone, ghashes = {}, {}
  for x = 1, #keys do
    if had[x] == 1 then
      gone[#gone + 1] = keys[x]
      if hashes then ghashes[#ghashes + 1] = hashes[x] end
    elseif not hashes then
      unknown = unknown + 1
    end
  end
  if hashes then removed = removed + #keys else removed = removed + #gone end
  if #gone == 0 then return end
  call('SREM', sets[bit], gone, 1, #gone)
  if not hashes then return end
  local other = call('SMISMEMBER', sets[3 - bit], gone, 1, #gone)
  local unmap = {}
  for x = 1, #gone do
    if other[x] == 0 then unmap[#unmap + 1] = ghashes[x] end
  end
  call('HDEL', map, unmap, 1, #unmap)
end
-- resolve maps the engine hashes ARGV[i..i+n-1] to keys; it returns the
-- keys and hashes found and how many were not.
local function resolve(i, n)
  local found = call('HMGET', map, ARGV, i, i + n - 1)
  local keys, hs = {}, {}
  for x = 1, n do
    if found[x] then
      keys[#keys + 1] = found[x]
      hs[#hs + 1] = ARGV[i + x - 1]
    end
  end
  return keys, hs, n - #keys
end

local a = 5
while a <= #ARGV do
  local op, bit, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  if op == 'S' then
    local took = hold(ARGV, a, n, bit)
    if took > 0 then
      redis.call('HSET', map, '~pad', pad)
      call('HSET', map, ARGV, a + n, a + n + 2 * took - 1)
    end
    a = a + 3 * n
  else
    if op == 'K' then
      hold(ARGV, a, n, bit)
    elseif op == 'M' then
      local keys, _, missing = resolve(a, n)
      unresolved = unresolved + missing
      hold(keys, 1, #keys, bit)
    elseif op == 'R' then
      local keys, hs, missing = resolve(a, n)
      unknown = unknown + missing
      release(keys, hs, bit)
    elseif op == 'D' then
      local keys = {}
      for x = 1, n do keys[x] = ARGV[a + x - 1] end
      release(keys, false, bit)
    elseif op == 'C' then
      redis.call('DEL', sets[1], sets[2], map)
    end
    a = a + n
  end
end
redis.call('HSET', map, 'seq', ARGV[1])
local ttl = tonumber(ARGV[2])
if ARGV[4] ~= '' then
  redis.call('SADD', KEYS[4], ARGV[4])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end
end
if ttl > 0 then
  for _, k in ipairs({sets[1], sets[2], map}) do redis.call('PEXPIRE', k, ttl) end
end
return {stored, removed, unknown, unresolved, full}
`

// allScripts are the sources of every script, loaded together when the
// server lost its script cache.
var allScripts = []string{prefixMatchSrc, prefixAddSrc, prefixCapacitySrc, prefixRemoveSrc, eventMatchSrc, eventApplySrc, inflightSyncSrc}

// inflightSyncScript publishes a replica's in-flight counts and reads the
// other replicas'. KEYS: the replicas set, the replica's own hash. ARGV: the
// replica id, the expiry in milliseconds, the prefix of the replicas'
// hashes, "1" to replace the replica's counts with the endpoint, value
// pairs that follow ("0": keep them, heartbeat only). The hash's expiry is
// extended (the heartbeat) and the replica added to the set while the hash
// exists. Replicas whose hash expired are removed from the set. Returns 1 if
// the replica's hash exists (0: the server lost it, or it is empty), then
// every other replica's hash as a flat field, value array.
var inflightSyncScript = redis.NewScript(inflightSyncSrc)

const inflightSyncSrc = `
local own = KEYS[2]
if ARGV[4] == '1' then
  redis.call('DEL', own)
  for i = 5, #ARGV - 1, 2 do
    redis.call('HSET', own, ARGV[i], ARGV[i + 1])
  end
end
local out = {0}
if redis.call('PEXPIRE', own, ARGV[2]) == 1 then
  redis.call('SADD', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  out[1] = 1
end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if id ~= ARGV[1] then
    local h = redis.call('HGETALL', ARGV[3] .. id)
    if #h == 0 then
      redis.call('SREM', KEYS[1], id)
    else
      out[#out + 1] = h
    end
  end
end
return out
`
