package redisindex

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs atomically on the server, so replicas calling
// them concurrently never see or leave a half-applied update. Block hashes
// and keys travel as 8-byte big-endian strings, a whole chain packed into
// one argument.

// Both indexes keep who holds each block in a holders hash: block hash (or
// key) → bitmap of the endpoints that hold it, an endpoint's id being the
// number in its id key. The approximate index gives an endpoint one bit
// (bit id), the precise one two (bit 2·id: on the GPU, 2·id+1: on the CPU);
// bit p is bit p % 8 of byte p / 8, and trailing zero bytes are cut, so
// equal sets are equal strings. A lookup reads the holders of the
// request's blocks once for all endpoints.

// logLib writes an index's change log: a stream to which every script that
// changes the holders or the endpoints' ids appends what it changed, so
// that a replica can keep a copy of them (Config.Mirror, mirror.go).
// Entries have IDs <epoch>-<n>, n counting from 1 without a gap; the epoch
// (the server's clock in milliseconds when the log began) and the last n
// are kept in the epoch key, a hash, so the numbering survives the
// stream's trimming, and a log begun again (the keys were lost) has a new
// epoch: a reader can tell a continuous log from a new one. Each entry has
// fields k (the kind), p and v:
//
//	s, c  bit p was set (s) or cleared (c) in the holders of v (packed keys)
//	x     the bits of ids p (a comma-separated list) were cleared in the holders of v (the sweep)
//	i     id p was given to endpoint v
//	d     endpoint v lost its id (removed, cleared, emptied)
//	f     id p was freed (the sweep cleared its bits everywhere)
//
// The scripts using it set logk and epk (the stream and the epoch key)
// first. The stream keeps about logLen entries.
const logLib = `
local logk, epk, epoch = false, false, false
local function emit(kind, p, v)
  if not logk then return end
  if not epoch then
    epoch = redis.call('HGET', epk, 'e')
    if not epoch then
      local t = redis.call('TIME')
      epoch = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
      redis.call('HSET', epk, 'e', epoch, 'n', 0)
    end
  end
  local id = epoch .. '-' .. redis.call('HINCRBY', epk, 'n', 1)
  local r = redis.pcall('XADD', logk, 'MAXLEN', '~', ` + logLen + `, id, 'k', kind, 'p', p, 'v', v)
  if type(r) == 'table' and r.err then
    -- the stream has a larger ID (the epoch key was lost, and the clock is
    -- behind the old epoch): begin again, readers load again
    redis.call('DEL', logk)
    redis.call('XADD', logk, id, 'k', kind, 'p', p, 'v', v)
  end
end
`

// logLen is about how many entries an index's change log keeps (XADD
// MAXLEN ~): a mirror further behind than that loads the index again.
const logLen = "10000"

// holderLib is the Lua shared by the scripts that change what an endpoint
// holds. flip sets (on) or clears bit pos in the holders of t[i..j] and
// returns how many bits changed (setbits, when the holders were read
// already); trim evicts an approximate endpoint's
// lowest-scored blocks down to cap and clears their bits.
const holderLib = logLib + `
-- setbits sets (on) or clears bit pos in the holders of t[i..j], whose
-- values (false: none) are vals[1..j-i+1], and returns how many changed.
local function setbits(hold, pos, t, i, j, vals, on)
  local bi, mask = math.floor(pos / 8) + 1, 2 ^ (pos % 8)
  local alone = string.rep('\0', bi - 1) .. string.char(mask) -- the bit on its own
  local byte, sub, band = string.byte, string.sub, bit.band
  local changed = 0
  local now, put, del, ch = {}, {}, {}, {}
  for x = i, j do
    local f = t[x]
    local v = now[f] or vals[x - i + 1] or ''
    local b = byte(v, bi) or 0
    if on then
      if v == '' then
        changed = changed + 1
        now[f] = alone
      elseif band(b, mask) == 0 then
        changed = changed + 1
        if #v < bi then
          now[f] = v .. sub(alone, #v + 1)
        else
          now[f] = sub(v, 1, bi - 1) .. string.char(b + mask) .. sub(v, bi + 1)
        end
      end
    elseif v == alone then
      changed = changed + 1
      now[f] = ''
    elseif band(b, mask) ~= 0 then
      changed = changed + 1
      v = sub(v, 1, bi - 1) .. string.char(b - mask) .. sub(v, bi + 1)
      local n = #v
      while n > 0 and byte(v, n) == 0 do n = n - 1 end
      now[f] = sub(v, 1, n)
    end
  end
  for f, v in pairs(now) do
    ch[#ch + 1] = f
    if v == '' then
      del[#del + 1] = f
    else
      put[#put + 1] = f
      put[#put + 1] = v
    end
    if #put >= 1000 then
      redis.call('HSET', hold, unpack(put))
      put = {}
    end
    if #del >= 1000 then
      redis.call('HDEL', hold, unpack(del))
      del = {}
    end
  end
  if #put > 0 then redis.call('HSET', hold, unpack(put)) end
  if #del > 0 then redis.call('HDEL', hold, unpack(del)) end
  if #ch > 0 then emit(on and 's' or 'c', pos, table.concat(ch)) end
  return changed
end
-- flip is setbits reading the values itself, 500 at a time.
local function flip(hold, pos, t, i, j, on)
  local changed = 0
  for s = i, j, 500 do
    local e = math.min(j, s + 499)
    changed = changed + setbits(hold, pos, t, s, e, redis.call('HMGET', hold, unpack(t, s, e)), on)
  end
  return changed
end
local function trim(set, hold, id, cap)
  local size = redis.call('ZCARD', set)
  if size <= cap then return size end
  if id then
    local gone = redis.call('ZRANGE', set, 0, size - cap - 1)
    flip(hold, id, gone, 1, #gone, false)
  end
  redis.call('ZREMRANGEBYRANK', set, 0, size - cap - 1)
  return cap
end
-- newID claims the lowest id the owners hash does not list for endpoint ep
-- and writes it to its id key. A dropped id stays listed until the sweep has
-- cleared its bits everywhere.
local function newID(owners, idk, ep)
  local id = 0
  while redis.call('HSETNX', owners, id, ep) == 0 do id = id + 1 end
  redis.call('SET', idk, id)
  emit('i', id, ep)
  return id
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
// hash, its id key, the owners hash (id → endpoint), the change log and
// its epoch key. ARGV: endpoint, capacity (0: the stored one, else the
// default), default capacity, TTL in ms (0: none), the number of chains,
// then for each chain j: the depth s of its first block sent (the blocks
// before it are credited by a later chain), the number of blocks sent, and
// their hashes, one argument each. A chain's blocks past the capacity are
// not credited.
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
logk, epk = KEYS[6], KEYS[7]
local cap = tonumber(ARGV[2])
if cap <= 0 then cap = tonumber(redis.call('HGET', caps, ARGV[1]) or ARGV[3]) end
local id = redis.call('GET', idk)
if not id or redis.call('EXISTS', set) == 0 then id = newID(owners, idk, ARGV[1]) end
id = tonumber(id)
local D = 65536
local top = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')
local seq = 1
if top[2] then seq = math.floor(tonumber(top[2]) / D) + 1 end
-- The blocks each chain adds: what the set holds of a chain is a run from
-- its block 0, so the first block sent that it lacks is found by galloping
-- and bisecting, and every block after it is new too. (The chains' blocks
-- sent are disjoint, so crediting one does not change what the next adds.)
local fresh, args = {}, {}
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
  local base = (seq + j) * D + D - 1
  for d = s, last do
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
flip(hold, id, fresh, 1, #fresh, true)
local size = trim(set, hold, id, cap)
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  for _, key in ipairs({set, idk, hold, owners, logk, epk}) do redis.call('PEXPIRE', key, ttl) end
end
if size == 0 and redis.call('DEL', idk) == 1 then emit('d', '', ARGV[1]) end
return size
`

// prefixCapacityScript sets an endpoint's capacity and trims its set to
// it. KEYS: as prefixAddScript's. ARGV: endpoint, capacity (0: back to the
// default), default capacity, TTL in ms.
var prefixCapacityScript = redis.NewScript(prefixCapacitySrc)

const prefixCapacitySrc = holderLib + `
local set, caps, hold, idk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
logk, epk = KEYS[6], KEYS[7]
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

const prefixRemoveSrc = logLib + `
logk, epk = KEYS[6], KEYS[7]
redis.call('DEL', KEYS[1])
if redis.call('DEL', KEYS[4]) == 1 then emit('d', '', ARGV[1]) end
redis.call('HDEL', KEYS[2], ARGV[1])
return 0
`

// orphansLib has isOrphan, true while id is dropped: the owners hash
// (KEYS[2] of the scripts using it) lists it, but its endpoint's id key
// (the prefix idp, then the endpoint) is gone or names another id. No
// script sets a dropped id's bits again.
const orphansLib = `
local function isOrphan(owners, idp, id)
  local ep = redis.call('HGET', owners, id)
  return ep and redis.call('GET', idp .. ep) ~= id
end
`

// orphansScript lists the dropped ids of an index (the endpoint was removed
// or cleared, or its data expired). KEYS: the holders hash, the owners
// hash; ARGV[1]: the prefix of the id keys.
var orphansScript = redis.NewScript(orphansSrc)

const orphansSrc = orphansLib + `
local out = {}
local all = redis.call('HKEYS', KEYS[2])
for _, id in ipairs(all) do
  if isOrphan(KEYS[2], ARGV[1], id) then out[#out + 1] = id end
end
return out
`

// sweepScript clears dropped ids' bits in one step of a scan of a holders
// hash. KEYS: the holders hash, the owners hash, the change log and its
// epoch key. ARGV: the scan cursor, the number of fields to scan, the bits
// per id, the prefix of the id keys, then the ids. Only the ids still dropped are cleared: another replica's
// sweep may have freed one, and a new endpoint taken it, since the scan
// began. It returns the next cursor ("0": the scan is complete).
var sweepScript = redis.NewScript(sweepSrc)

const sweepSrc = orphansLib + logLib + `
local hold = KEYS[1]
logk, epk = KEYS[3], KEYS[4]
local r = redis.call('HSCAN', hold, ARGV[1], 'COUNT', ARGV[2])
local per = tonumber(ARGV[3])
local masks, swept, cleared = {}, {}, {}
for i = 5, #ARGV do
  if isOrphan(KEYS[2], ARGV[4], ARGV[i]) then
    swept[#swept + 1] = ARGV[i]
    for t = 0, per - 1 do
      local pos = per * tonumber(ARGV[i]) + t
      local bi = math.floor(pos / 8) + 1
      masks[bi] = bit.bor(masks[bi] or 0, 2 ^ (pos % 8))
    end
  end
end
local kv = r[2]
for i = 1, #kv, 2 do
  local bytes = {string.byte(kv[i + 1], 1, -1)}
  local changed = false
  for bi, mask in pairs(masks) do
    if bytes[bi] and bit.band(bytes[bi], mask) ~= 0 then
      bytes[bi] = bit.band(bytes[bi], 255 - mask)
      changed = true
    end
  end
  if changed then
    cleared[#cleared + 1] = kv[i]
    local e = #bytes
    while e > 0 and bytes[e] == 0 do e = e - 1 end
    if e == 0 then
      redis.call('HDEL', hold, kv[i])
    else
      redis.call('HSET', hold, kv[i], string.char(unpack(bytes, 1, e)))
    end
  end
end
if #cleared > 0 then emit('x', table.concat(swept, ','), table.concat(cleared)) end
return r[1]
`

// freeScript frees the ids of ARGV[2..] that are still dropped, once a
// sweep has cleared their bits. KEYS: the holders hash, the owners hash,
// the change log and its epoch key; ARGV[1]: the prefix of the id keys.
var freeScript = redis.NewScript(freeSrc)

const freeSrc = orphansLib + logLib + `
logk, epk = KEYS[3], KEYS[4]
for i = 2, #ARGV do
  if isOrphan(KEYS[2], ARGV[1], ARGV[i]) then
    redis.call('HDEL', KEYS[2], ARGV[i])
    emit('f', ARGV[i], '')
  end
end
return 0
`

// eventMatchScript finds, for each endpoint, the consecutive blocks of the
// request's keys from block 0 it holds, per best tier. KEYS[1]: the
// holders hash; then each endpoint's id key. ARGV[1]: the keys, packed
// (cutting them costs the server less than reading as many arguments
// costs the client and the server). It returns the GPU and CPU counts of
// each endpoint in turn. The holders are read in growing chunks (16, 64,
// 256, 1024) until no endpoint's run goes on, once for all endpoints; a run
// of blocks with the same holders is counted at once.
var eventMatchScript = redis.NewScript(eventMatchSrc)

const eventMatchSrc = `
local hold = KEYS[1]
local ids = redis.call('MGET', unpack(KEYS, 2))
local byte, band, floor = string.byte, bit.band, math.floor
local g, c, at, gm, both = {}, {}, {}, {}, {}
local alive, na = {}, 0
for e = 1, #ids do
  g[e], c[e] = 0, 0
  local id = tonumber(ids[e])
  if id then
    na = na + 1
    alive[na] = e
    at[e], gm[e] = floor(id / 4) + 1, 2 ^ (2 * id % 8)
    both[e] = 3 * gm[e]
  end
end
-- cur: the holders of the current run of blocks, len its length.
local cur, len = false, 0
local function settle()
  for s = 1, na do
    local e = alive[s]
    if band(byte(cur, at[e]) or 0, gm[e]) ~= 0 then g[e] = g[e] + len else c[e] = c[e] + len end
  end
end
local keys, sub, fields = ARGV[1], string.sub, {}
local n, i, size = #keys / 8, 1, 16
while i <= n and na > 0 do
  local j = math.min(n, i + size - 1)
  for t = i, j do fields[t - i + 1] = sub(keys, t * 8 - 7, t * 8) end
  local vs = redis.call('HMGET', hold, unpack(fields, 1, j - i + 1))
  for t = 1, j - i + 1 do
    local v = vs[t] or ''
    if v ~= cur then
      if len > 0 then settle() end
      cur, len = v, 0
      -- endpoints holding the block in neither tier end their run here
      local k = 0
      for s = 1, na do
        local e = alive[s]
        if band(byte(v, at[e]) or 0, both[e]) ~= 0 then
          k = k + 1
          alive[k] = e
        end
      end
      na = k
      if na == 0 then break end
    end
    len = len + 1
  end
  i = j + 1
  if size < 1024 then size = size * 4 end
end
if na > 0 and len > 0 then settle() end
local out = {}
for e = 1, #ids do
  out[2 * e - 1] = g[e]
  out[2 * e] = c[e]
end
return out
`

// eventApplyScript applies one batch of an endpoint's events. KEYS: the
// holders hash, the endpoint's id key, its mappings (engine hash → block
// key, plus the fields "seq": the last batch applied, and "n": the (block,
// tier) entries it holds), the set of base models (exact keys), the owners
// hash (id → endpoint), the change log and its epoch key. ARGV: the
// batch's sequence number (20 digits), TTL in ms, the endpoint's entry
// limit, a model to add to the base models ("" none), the endpoint, then
// each operation: code, tier (1 GPU, 2 CPU), count n, and its items,
// 8-byte hashes or keys, one argument each (the script passes ranges of
// ARGV to the server as they are: building tables costs the interpreter
// more than the server spends on the commands):
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
// it would undo newer events. Applying a batch again changes nothing. A
// clear drops the endpoint's id (the sweep clears its bits later) and its
// mappings; an endpoint without an id, or whose mappings are gone
// (expired) while its id key lingers, takes a new one. It returns the
// counts stored, removed, unknown removes, unresolved moves and refused
// (entry limit).
var eventApplyScript = redis.NewScript(eventApplySrc)

const eventApplySrc = holderLib + `
local hkey, idk, map, owners = KEYS[1], KEYS[2], KEYS[3], KEYS[5]
logk, epk = KEYS[6], KEYS[7]
local last = redis.call('HGET', map, 'seq')
if last and ARGV[1] < last then return {-1} end
local maxn = tonumber(ARGV[3])
local band = bit.band
local stored, removed, unknown, unresolved, full = 0, 0, 0, 0, 0
local id = redis.call('GET', idk)
if id and not last then id = false end -- its mappings expired: a new id
if id then id = tonumber(id) end
local held = tonumber(redis.call('HGET', map, 'n') or '0')
-- The mappings hash gets a field longer than any server keeps in a compact
-- hash (hash-max-listpack-value, 64 by default): it is a real hash table
-- from its first entry, and a lookup costs the same whatever its size.
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
-- pos is the endpoint's bit for tier bit (1 GPU, 2 CPU), taking an id for
-- it if it has none.
local function pos(bit)
  if not id then id = newID(owners, idk, ARGV[5]) end
  return 2 * id + bit - 1
end
-- has tells whether holders v have the endpoint's bit for tier bit.
local function has(v, bit)
  if not id or not v then return false end
  local p = 2 * id + bit - 1
  return band(string.byte(v, math.floor(p / 8) + 1) or 0, 2 ^ (p % 8)) ~= 0
end
-- hold adds t[i..i+n-1] to tier bit, within the entry limit; it returns
-- how many (from the first) it took.
local function hold(t, i, n, bit)
  if n == 0 then return 0 end
  if held + n > maxn then
    local room = math.max(0, maxn - held)
    full = full + n - room
    n = room
  end
  if n > 0 then held = held + flip(hkey, pos(bit), t, i, i + n - 1, true) end
  stored = stored + n
  return n
end
-- release removes keys from tier bit; hashes[x], when given, names
-- keys[x] and is unmapped once the endpoint holds the block in no tier.
local function release(keys, hashes, bit)
  if #keys == 0 then return end
  local vals = call('HMGET', hkey, keys, 1, #keys)
  local gone, goneVals, unmap = {}, {}, {}
  for x = 1, #keys do
    if has(vals[x], bit) then
      gone[#gone + 1] = keys[x]
      goneVals[#gone] = vals[x]
      if hashes and not has(vals[x], 3 - bit) then unmap[#unmap + 1] = hashes[x] end
    elseif not hashes then
      unknown = unknown + 1
    end
  end
  if hashes then removed = removed + #keys else removed = removed + #gone end
  if #gone == 0 then return end
  held = held - setbits(hkey, pos(bit), gone, 1, #gone, goneVals, false)
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

local a = 6
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
      redis.call('DEL', map)
      if redis.call('DEL', idk) == 1 then emit('d', '', ARGV[5]) end
      id, held = false, 0
    end
    a = a + n
  end
end
redis.call('HSET', map, 'seq', ARGV[1], 'n', held)
local ttl = tonumber(ARGV[2])
if ARGV[4] ~= '' then
  redis.call('SADD', KEYS[4], ARGV[4])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end
end
if ttl > 0 then
  for _, k in ipairs({idk, map, hkey, owners, logk, epk}) do redis.call('PEXPIRE', k, ttl) end
end
return {stored, removed, unknown, unresolved, full}
`

// eventDropScript forgets an endpoint of the precise index (a clear or a
// removal outside a batch). KEYS: its id key, its mappings, the change log
// and its epoch key. ARGV[1]: the endpoint. Its id is dropped, its bits
// left for the sweep to clear.
var eventDropScript = redis.NewScript(eventDropSrc)

const eventDropSrc = logLib + `
logk, epk = KEYS[3], KEYS[4]
redis.call('DEL', KEYS[2])
if redis.call('DEL', KEYS[1]) == 1 then emit('d', '', ARGV[1]) end
return 0
`

// allScripts are the sources of every script, loaded together when the
// server lost its script cache.
var allScripts = []string{prefixMatchSrc, prefixAddSrc, prefixCapacitySrc, prefixRemoveSrc, orphansSrc, sweepSrc, freeSrc, eventMatchSrc, eventApplySrc, eventDropSrc, inflightSyncSrc}

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
