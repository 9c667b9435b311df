package redisindex

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the server, so replicas calling
// them concurrently never see or leave a half-applied update. Block hashes
// and keys travel as 8-byte big-endian strings, a whole chain packed into
// one argument.

// The approximate index keeps, beside each endpoint's sorted set, who holds
// each block: the holders hash maps a block's hash to a bitmap of the
// endpoints that hold it (bit id % 8 of byte id / 8, trailing zero bytes
// cut, so equal sets are equal strings), an endpoint's id being the number
// in its id key. As what each endpoint holds is closed under prefixes, the
// holders of a chain's blocks shrink along it, and a lookup finds every
// endpoint's run by bisecting the chain once for all of them.

// holderLib is the Lua shared by the scripts that change what an endpoint
// holds: flip sets (on) or clears its bit in the holders of fields, trim
// evicts its lowest-scored blocks down to cap and clears their bits.
const holderLib = `
local function flip(hold, id, fields, on)
  local bi, mask = math.floor(id / 8) + 1, 2 ^ (id % 8)
  for s = 1, #fields, 500 do
    local part = {unpack(fields, s, math.min(#fields, s + 499))}
    local vals = redis.call('HMGET', hold, unpack(part))
    local put, del = {}, {}
    for x = 1, #part do
      local v = vals[x] or ''
      local b = string.byte(v, bi) or 0
      local nb = b
      if on then nb = bit.bor(b, mask) else nb = bit.band(b, 255 - mask) end
      if nb ~= b then
        if #v < bi then
          v = v .. string.rep('\0', bi - 1 - #v) .. string.char(nb)
        else
          v = string.sub(v, 1, bi - 1) .. string.char(nb) .. string.sub(v, bi + 1)
        end
        local e = #v
        while e > 0 and string.byte(v, e) == 0 do e = e - 1 end
        if e == 0 then
          del[#del + 1] = part[x]
        else
          put[#put + 1] = part[x]
          put[#put + 1] = string.sub(v, 1, e)
        end
      end
    end
    if #put > 0 then redis.call('HSET', hold, unpack(put)) end
    if #del > 0 then redis.call('HDEL', hold, unpack(del)) end
  end
end
local function trim(set, hold, id, cap)
  local size = redis.call('ZCARD', set)
  if size <= cap then return size end
  if id then flip(hold, id, redis.call('ZRANGE', set, 0, size - cap - 1), false) end
  redis.call('ZREMRANGEBYRANK', set, 0, size - cap - 1)
  return cap
end
`

// prefixMatchScript finds, for each endpoint, how many consecutive blocks of
// the chain from block 0 it holds. KEYS[1]: the holders hash; then each
// endpoint's id key. ARGV[1]: the chain. The holders of block d include
// those of block d+1, so an endpoint's run ends where its bit goes: the
// script bisects every interval whose ends differ, all of one round in one
// HMGET, and an endpoint whose bit is set at lo and clear at lo+1 holds
// lo+1 blocks. The probes are shared by all endpoints: about
// k·log₂(n/k) for k distinct run lengths, whatever the number of
// endpoints.
var prefixMatchScript = redis.NewScript(prefixMatchSrc)

const prefixMatchSrc = `
local chain, hold = ARGV[1], KEYS[1]
local n = #chain / 8
local ids = redis.call('MGET', unpack(KEYS, 2))
local run = {}
local sub, byte, band, bnot, floor = string.sub, string.byte, bit.band, bit.bnot, math.floor
local first = redis.call('HGET', hold, sub(chain, 1, 8))
if first then
  local LOG = {[1] = 0, [2] = 1, [4] = 2, [8] = 3, [16] = 4, [32] = 5, [64] = 6, [128] = 7}
  -- Open intervals (lo, hi, holders at lo, holders at hi), four slots
  -- each, in cur; position n, past the chain, is held by nobody. The tables
  -- are reused from round to round (making tables is what costs the
  -- interpreter most): m counts the slots of cur in use.
  local cur, nxt, fields, at = {0, n, first, ''}, {}, {}, {}
  local m = 4
  while m > 0 do
    local f = 0
    for i = 1, m, 4 do
      local lo, hi = cur[i], cur[i + 1]
      if hi - lo == 1 then
        local a, b = cur[i + 2], cur[i + 3]
        for j = 1, #a do
          local x = band(byte(a, j), bnot(byte(b, j) or 0))
          while x ~= 0 do
            local low = band(x, -x)
            run[j * 8 - 8 + LOG[low]] = hi
            x = x - low
          end
        end
      else
        local mid = lo + floor((hi - lo) / 2)
        f = f + 1
        fields[f] = sub(chain, mid * 8 + 1, mid * 8 + 8)
        at[f] = i
      end
    end
    m = 0
    if f > 0 then
      local vs = redis.call('HMGET', hold, unpack(fields, 1, f))
      for t = 1, f do
        local i = at[t]
        local lo, hi, a, b = cur[i], cur[i + 1], cur[i + 2], cur[i + 3]
        local mid = lo + floor((hi - lo) / 2)
        local v = vs[t] or ''
        if v ~= a then
          nxt[m + 1], nxt[m + 2], nxt[m + 3], nxt[m + 4] = lo, mid, a, v
          m = m + 4
        end
        if v ~= b then
          nxt[m + 1], nxt[m + 2], nxt[m + 3], nxt[m + 4] = mid, hi, v, b
          m = m + 4
        end
      end
    end
    cur, nxt = nxt, cur
  end
end
local out = {}
for e = 1, #ids do
  local id = tonumber(ids[e])
  out[e] = id and run[id] or 0
end
return out
`

// prefixAddScript credits an endpoint with one or more chains, as if added
// one after the other. KEYS: its sorted set, the capacity hash, the holders
// hash, its id key, the owners hash (id → endpoint). ARGV: endpoint,
// capacity (0: the stored one, else the default), default capacity, TTL in
// ms (0: none), the number of chains, then for each chain j: the depth s of
// its first block sent (the blocks before it are credited by a later
// chain), the number of blocks sent, and their hashes, one argument each. A
// chain's blocks past the capacity are not credited.
//
// A block's score is (seq + j)·65536 + (65535 − depth), seq one more than
// the newest Add's: a newer Add outranks every older one, and within one
// Add a block outranks the blocks after it. Every Add credits a chain from
// block 0, so a held block's parent always scores higher than the block;
// trimming the lowest scores therefore evicts least recently used prefixes,
// tails first, and leaves what an endpoint holds closed under prefixes, as
// kvindex.PrefixIndex does. seq needs no counter: it is read from the set's
// top score.
//
// The endpoint's bit is set in the holders of the blocks it did not hold
// (of a chain's blocks sent, those past the ones it holds, found by
// bisection) and cleared in those of the blocks evicted. An endpoint
// without an id, or whose set is gone (expired) while its id key lingers,
// takes the lowest id the owners hash does not list; a dropped id stays
// listed until the sweep has cleared its bits everywhere.
var prefixAddScript = redis.NewScript(prefixAddSrc)

const prefixAddSrc = holderLib + `
local set, caps, hold, idk, owners = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local cap = tonumber(ARGV[2])
if cap <= 0 then cap = tonumber(redis.call('HGET', caps, ARGV[1]) or ARGV[3]) end
local id = redis.call('GET', idk)
if not id or redis.call('EXISTS', set) == 0 then
  id = 0
  while redis.call('HSETNX', owners, id, ARGV[1]) == 0 do id = id + 1 end
  redis.call('SET', idk, id)
end
id = tonumber(id)
local D = 65536
local top = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')
local seq = 1
if top[2] then seq = math.floor(tonumber(top[2]) / D) + 1 end
-- The blocks each chain adds: what the set holds of a chain is a run from
-- its block 0, so the first block sent that it lacks is found by galloping
-- and bisecting, and every block after it is new too.
local fresh = {}
local i = 6
for j = 0, tonumber(ARGV[5]) - 1 do
  local s, k = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  local last = math.min(s + k, cap) - 1
  if last >= s then
    local function held(d) return redis.call('ZSCORE', set, ARGV[i + 2 + d - s]) end
    local from = s
    if held(s) then
      if held(last) then
        from = last + 1
      else
        local lo, hi, step = s, last, 1
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
        from = hi
      end
    end
    for d = from, last do fresh[#fresh + 1] = ARGV[i + 2 + d - s] end
  end
  i = i + 2 + k
end
local args = {}
i = 6
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
flip(hold, id, fresh, true)
local size = trim(set, hold, id, cap)
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  for _, key in ipairs({set, idk, hold, owners}) do redis.call('PEXPIRE', key, ttl) end
end
if size == 0 then redis.call('DEL', idk) end
return size
`

// prefixCapacityScript sets an endpoint's capacity and trims its set to
// it. KEYS: as prefixAddScript's. ARGV: endpoint, capacity (0: back to the
// default), default capacity, TTL in ms.
var prefixCapacityScript = redis.NewScript(prefixCapacitySrc)

const prefixCapacitySrc = holderLib + `
local set, caps, hold, idk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local cap = tonumber(ARGV[2])
if cap <= 0 then
  redis.call('HDEL', caps, ARGV[1])
  cap = tonumber(ARGV[3])
else
  redis.call('HSET', caps, ARGV[1], cap)
  local ttl = tonumber(ARGV[4])
  if ttl > 0 then redis.call('PEXPIRE', caps, ttl) end
end
local id = redis.call('GET', idk)
trim(set, hold, id and tonumber(id), cap)
return 0
`

// prefixRemoveScript forgets an endpoint. KEYS: as prefixAddScript's.
// ARGV[1]: the endpoint. Its id is dropped with its id key, its bits left
// for the sweep to clear.
var prefixRemoveScript = redis.NewScript(prefixRemoveSrc)

const prefixRemoveSrc = `
redis.call('DEL', KEYS[1], KEYS[4])
redis.call('HDEL', KEYS[2], ARGV[1])
return 0
`

// prefixOrphansScript lists the dropped ids: those the owners hash lists
// whose endpoint's id key is gone or names another id (the endpoint was
// removed, or its data expired). KEYS[1]: the owners hash; ARGV[1]: the
// prefix of the id keys. No script ever sets a dropped id's bits again.
var prefixOrphansScript = redis.NewScript(prefixOrphansSrc)

const prefixOrphansSrc = `
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if redis.call('GET', ARGV[1] .. all[i + 1]) ~= all[i] then out[#out + 1] = all[i] end
end
return out
`

// prefixSweepScript clears dropped ids' bits in one step of a scan of the
// holders hash. KEYS[1]: the holders hash. ARGV: the scan cursor, the
// number of fields to scan, then the ids. It returns the next cursor ("0":
// the scan is complete).
var prefixSweepScript = redis.NewScript(prefixSweepSrc)

const prefixSweepSrc = `
local hold = KEYS[1]
local r = redis.call('HSCAN', hold, ARGV[1], 'COUNT', ARGV[2])
local masks = {}
for i = 3, #ARGV do
  local id = tonumber(ARGV[i])
  local bi = math.floor(id / 8) + 1
  masks[bi] = bit.bor(masks[bi] or 0, 2 ^ (id % 8))
end
local kv = r[2]
for i = 1, #kv, 2 do
  local v = kv[i + 1]
  local bytes = {string.byte(v, 1, -1)}
  local changed = false
  for bi, mask in pairs(masks) do
    if bytes[bi] and bit.band(bytes[bi], mask) ~= 0 then
      bytes[bi] = bit.band(bytes[bi], 255 - mask)
      changed = true
    end
  end
  if changed then
    local e = #bytes
    while e > 0 and bytes[e] == 0 do e = e - 1 end
    if e == 0 then
      redis.call('HDEL', hold, kv[i])
    else
      redis.call('HSET', hold, kv[i], string.char(unpack(bytes, 1, e)))
    end
  end
end
return r[1]
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
var allScripts = []string{prefixMatchSrc, prefixAddSrc, prefixCapacitySrc, prefixRemoveSrc, prefixOrphansSrc, prefixSweepSrc, eventMatchSrc, eventApplySrc, inflightSyncSrc}

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
