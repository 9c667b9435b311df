package kvindex

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// DefaultEventBlockTokens is the tokens per block of the precise index: the
// engines' usual KV block size.
const DefaultEventBlockTokens = 16

// Tier is a cache tier an engine holds blocks in.
type Tier uint8

// The tiers of the precise index.
const (
	// TierGPU holds blocks in GPU memory (medium "GPU" or none).
	TierGPU Tier = iota
	// TierCPU holds blocks anywhere else the engine can load them from
	// ("CPU", SGLang's "CPU_PINNED", "DISK", ...).
	TierCPU
)

// TierOf returns the tier of an event's medium.
func TierOf(medium string) Tier {
	if medium == "" || medium == MediumGPU {
		return TierGPU
	}
	return TierCPU
}

// HashAlgorithm names how the precise index keys blocks.
type HashAlgorithm string

// The key algorithms.
const (
	// HashXXH64 keys blocks by our own chained xxhash64 over token ids
	// (ChainHasher's, rooted at the model or LoRA name and the cache salt),
	// whatever the engines' hash seeds: the default.
	HashXXH64 HashAlgorithm = "xxh64"
	// HashSHA256CBOR keys blocks by the engines' own sha256_cbor hashes
	// (VLLMHasher), which requires every engine to use the configured seed.
	HashSHA256CBOR HashAlgorithm = "sha256_cbor"
)

// EventIndexConfig configures an EventIndex.
type EventIndexConfig struct {
	// BlockTokens is the tokens per block; events of another block size are
	// dropped and counted. 0 means DefaultEventBlockTokens.
	BlockTokens int
	// Algorithm is the key algorithm; "" means HashXXH64.
	Algorithm HashAlgorithm
	// HashSeed is the engines' PYTHONHASHSEED, for HashSHA256CBOR.
	HashSeed string
	// GPUWeight and CPUWeight weigh a matched block by the best tier it is
	// held in; both zero means 1.0 and 0.8.
	GPUWeight, CPUWeight float64
}

// EventIndexStats counts what the index did with the events it was given.
// Every event that could not be applied is counted under its reason and
// otherwise ignored: the index is never left inconsistent.
type EventIndexStats struct {
	Batches          uint64 // batches applied
	BlocksStored     uint64 // (block, endpoint, tier) stores applied, duplicates included
	BlocksRemoved    uint64 // removals applied, duplicates included
	Clears           uint64 // AllBlocksCleared events and ClearEndpoint calls
	UnknownRemoves   uint64 // removed hashes the index never saw (or already forgot)
	UnknownParents   uint64 // stores whose parent hash is unknown: their blocks cannot be keyed
	Unresolved       uint64 // token-less stores (tier moves) of unknown hashes
	Malformed        uint64 // stores whose token count is not blocks × block size, or bad extra keys
	BlockSizeMisses  uint64 // stores of another block size than the index's
	Conflicts        uint64 // an engine hash seen for two different keys
	SkippedGroups    uint64 // events of KV-cache groups other than 0
	Full             uint64 // blocks not stored because the index reached its size limit
	UnknownEndpoints uint64 // batches for endpoints the index was told to refuse
}

// EventIndex is the precise prefix-cache index: which endpoints hold which
// blocks, in which tier, as the engines report it through KV events (SPEC
// §5.2).
//
// Memory: each distinct block is a 12-byte node (its 64-bit key and an
// interned set of (endpoint, tier) bits) stored in place in a
// linear-probing table, and each engine hash an 8-byte slot (node position
// and 36 hash bits) of a second table; both are kept 64–80% full. Endpoints
// that hold a block add nothing but bits of a shared set, so a (block,
// endpoint) entry costs at most ≈ 31 bytes (no block shared, the worst
// case; measured 29.8 for a million) and much less when blocks are shared.
//
// Blocks are keyed by the index's own chained hash over token ids
// (HashXXH64: the keys ChainHasher computes for a request's token ids with
// BlockTokens-token blocks, so a scheduler can look a request up without the
// engine's hash seed) or by the engines' sha256_cbor hashes. For HashXXH64
// the index also maps each engine hash to the block it names (per model, so
// engines of different models never mix), so removals and parent hashes
// resolve; engines that share a hash seed share those mappings, others get
// one per (endpoint, block) only where they differ.
//
// Applying is idempotent: a duplicated store or removal changes nothing.
// Match may run concurrently with everything; Apply, ClearEndpoint and
// RemoveEndpoint serialise.
type EventIndex struct {
	mu      sync.RWMutex
	exact   bool
	weights [2]float64

	keys    keyTable
	hashes  hashTable
	sets    sets
	eps     []eventEndpoint
	ids     map[string]uint32
	freeIDs []uint32
	entries int
	// maybeStale counts blocks that died while a shared mapping may still
	// point at them; while it is zero, dead slots can be reused.
	maybeStale int
	models     map[string]uint64 // model → hash namespace
	stats      EventIndexStats

	ek     EventKeys // keys of stored blocks and of requests
	keybuf []uint64  // keys of the blocks of the event being stored
}

// eventEndpoint is the index's state for one endpoint.
type eventEndpoint struct {
	name string
	size int // blocks held, any tier
	// extra maps the mixed engine hashes of this endpoint that differ from
	// the block's shared mapping to node positions.
	extra map[uint64]uint32
	// aliased is set (until a clear) when the endpoint may hold a block
	// under two engine hashes, one of them a mapping of extra: a block it
	// leaves may then have mappings to drop besides the one removed.
	aliased bool
}

// NewEventIndex returns an empty index.
func NewEventIndex(cfg EventIndexConfig) (*EventIndex, error) {
	ek, err := NewEventKeys(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.GPUWeight < 0 || cfg.CPUWeight < 0 {
		return nil, errors.New("kvindex: tier weights must be ≥ 0")
	}
	x := &EventIndex{
		ek:      *ek,
		exact:   ek.Exact(),
		weights: TierWeights(cfg),
		sets:    newSets(),
		ids:     map[string]uint32{},
		models:  map[string]uint64{},
	}
	x.keys.nodes = make([]enode, minTableSize)
	x.hashes.slots = make([]uint64, minTableSize)
	return x, nil
}

// TierWeights returns the weights of a block matched in each tier
// (indexed by Tier) under cfg: GPUWeight and CPUWeight, or 1.0 and 0.8 when
// both are zero.
func TierWeights(cfg EventIndexConfig) [2]float64 {
	if cfg.GPUWeight == 0 && cfg.CPUWeight == 0 {
		return [2]float64{1, 0.8}
	}
	return [2]float64{cfg.GPUWeight, cfg.CPUWeight}
}

// BlockTokens returns the tokens per block.
func (x *EventIndex) BlockTokens() int { return x.ek.bt }

// Apply applies a decoded batch of the named endpoint's events in order.
// The batch's Model (from its topic) names the model whose blocks they are.
func (x *EventIndex) Apply(endpoint string, b *Batch) {
	x.mu.Lock()
	defer x.mu.Unlock()
	id := x.intern(endpoint)
	ns := x.namespace(b.Model)
	x.stats.Batches++
	for i := range b.Events {
		ev := &b.Events[i]
		if ev.HasGroup && ev.GroupIdx != 0 {
			x.stats.SkippedGroups++
			continue
		}
		switch ev.Kind {
		case BlockStored:
			if x.exact {
				x.storeExact(id, ev)
			} else {
				x.store(id, ns, b.Model, ev)
			}
		case BlockRemoved:
			x.remove(id, ns, ev)
		case AllBlocksCleared:
			x.clear(id)
		}
	}
}

// ClearEndpoint forgets every block the endpoint holds, as when its engine
// restarts; the endpoint stays known.
func (x *EventIndex) ClearEndpoint(endpoint string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if id, ok := x.ids[endpoint]; ok {
		x.clear(id)
	}
}

// RemoveEndpoint forgets the endpoint and its blocks.
func (x *EventIndex) RemoveEndpoint(endpoint string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	id, ok := x.ids[endpoint]
	if !ok {
		return
	}
	x.clear(id)
	x.stats.Clears-- // not an engine clear
	x.eps[id] = eventEndpoint{}
	delete(x.ids, endpoint)
	x.freeIDs = append(x.freeIDs, id)
}

// Len returns the number of (block, endpoint) entries, whatever their tiers.
func (x *EventIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.entries
}

// Stats returns the index's counters.
func (x *EventIndex) Stats() EventIndexStats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.stats
}

// Endpoints appends the names of the endpoints the index knows, sorted.
func (x *EventIndex) Endpoints(dst []string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := len(dst)
	for name := range x.ids {
		dst = append(dst, name)
	}
	slices.Sort(dst[n:])
	return dst
}

// BlockKeys appends the keys of the full blocks of a request's token ids
// (at most maxBlocks; ≤ 0 means DefaultMaxBlocks) to dst: what Match takes.
// model is the model the request is served as (after rewrites; a LoRA
// adapter's name for LoRA requests) and salt its cache salt. It allocates
// only if dst must grow.
func (x *EventIndex) BlockKeys(dst []uint64, model, salt string, tokens []uint32, maxBlocks int) []uint64 {
	base := false
	if x.exact {
		x.mu.RLock()
		_, base = x.models[model]
		x.mu.RUnlock()
	}
	return x.ek.BlockKeys(dst, model, salt, tokens, maxBlocks, base)
}

// Match sets matched[i] to the tier-weighted number of consecutive blocks,
// from block 0, of the request's keys (see BlockKeys) that endpoints[i]
// holds: a block counts GPUWeight if the endpoint holds it on the GPU, else
// CPUWeight; the run ends at the first block it holds in no tier. Unknown
// endpoints get 0. The walk stops when no endpoint's run continues. It
// allocates nothing in the steady state and panics if matched is shorter
// than endpoints.
func (x *EventIndex) Match(keys []uint64, endpoints []string, matched []float64) {
	matched = matched[:len(endpoints)]
	sc := eventScratches.Get().(*eventScratch)
	defer eventScratches.Put(sc)
	x.mu.RLock()
	defer x.mu.RUnlock()
	sc.fit(len(x.eps), x.sets.stride, len(endpoints))

	live := sc.live
	anyLive := false
	for i, name := range endpoints {
		matched[i] = 0
		id, ok := x.ids[name]
		if !ok {
			sc.idx[i] = -1
			continue
		}
		sc.idx[i] = int32(id)
		b := 2 * id
		live[b>>6] |= 1 << (b & 63)
		anyLive = true
	}
	var (
		cur uint32 // set of the current run of blocks
		run int32  // blocks in it
	)
	for _, k := range keys {
		if !anyLive {
			break
		}
		pos := x.keys.find(normKey(k))
		if pos < 0 {
			break
		}
		s := x.keys.nodes[pos].set
		if s != cur {
			x.settle(sc, cur, run)
			cur, run = s, 0
			anyLive = false
			for j, w := range x.sets.bits(s) {
				live[j] &= (w | w>>1) & evenBits
				anyLive = anyLive || live[j] != 0
			}
		}
		run++
	}
	x.settle(sc, cur, run)
	for i, id := range sc.idx[:len(endpoints)] {
		if id >= 0 {
			matched[i] = float64(sc.gpu[id])*x.weights[TierGPU] + float64(sc.cpu[id])*x.weights[TierCPU]
		}
	}
	for _, id := range sc.idx[:len(endpoints)] {
		if id >= 0 {
			sc.gpu[id], sc.cpu[id] = 0, 0
		}
	}
	clear(live)
}

const evenBits = 0x5555555555555555

// settle credits the endpoints still live with run blocks of set s, in the
// best tier they hold them.
func (x *EventIndex) settle(sc *eventScratch, s uint32, run int32) {
	if run == 0 || s == 0 {
		return
	}
	for j, w := range x.sets.bits(s) {
		l := sc.live[j]
		if l == 0 {
			continue
		}
		for g := l & w; g != 0; g &= g - 1 {
			sc.gpu[(j<<6|bits.TrailingZeros64(g))>>1] += run
		}
		for c := l & (w >> 1) &^ w; c != 0; c &= c - 1 {
			sc.cpu[(j<<6|bits.TrailingZeros64(c))>>1] += run
		}
	}
}

// eventScratch is Match's working memory. Between calls live is empty and
// gpu and cpu are zero.
type eventScratch struct {
	live     []uint64 // bit 2·id: endpoint id's run continues
	gpu, cpu []int32  // by endpoint id: blocks credited per tier
	idx      []int32  // endpoint id of each requested endpoint, -1 unknown
}

var eventScratches = sync.Pool{New: func() any { return new(eventScratch) }}

func (sc *eventScratch) fit(ids, words, n int) {
	if len(sc.live) < words {
		sc.live = make([]uint64, words)
	}
	sc.live = sc.live[:words]
	if len(sc.gpu) < ids {
		sc.gpu, sc.cpu = make([]int32, ids), make([]int32, ids)
	}
	if cap(sc.idx) < n {
		sc.idx = make([]int32, n)
	}
	sc.idx = sc.idx[:n]
}

// intern returns the id of the named endpoint, registering it if needed.
func (x *EventIndex) intern(name string) uint32 {
	if id, ok := x.ids[name]; ok {
		return id
	}
	var id uint32
	if n := len(x.freeIDs); n > 0 {
		id, x.freeIDs = x.freeIDs[n-1], x.freeIDs[:n-1]
	} else {
		id = uint32(len(x.eps))
		x.eps = append(x.eps, eventEndpoint{})
		x.sets.reserve(2*id + 1)
	}
	x.eps[id] = eventEndpoint{name: name}
	x.ids[name] = id
	return id
}

// namespace returns the hash namespace of a model: engine hashes do not
// include the model, so mappings are kept per model.
func (x *EventIndex) namespace(model string) uint64 {
	ns, ok := x.models[model]
	if !ok {
		if len(x.models) >= 1024 { // models come from topics: bound them
			clear(x.models)
		}
		ns = xxhash.Sum64String(model)
		x.models[model] = ns
	}
	return ns
}

// store applies a BlockStored event under HashXXH64.
func (x *EventIndex) store(id uint32, ns uint64, model string, ev *Event) {
	tier := TierOf(ev.Medium)
	n := len(ev.BlockHashes)
	if n == 0 {
		return
	}
	if len(ev.TokenIDs) == 0 { // a tier move: the blocks must be known
		for _, h := range ev.BlockHashes {
			if pos, _, _ := x.resolve(id, mixHash(h, ns)); pos >= 0 {
				x.hold(id, pos, tier)
				x.stats.BlocksStored++
			} else {
				x.stats.Unresolved++
			}
		}
		return
	}
	var parent uint64
	parentOK := false
	if ev.HasParent {
		if pos, _, _ := x.resolve(id, mixHash(ev.ParentHash, ns)); pos >= 0 {
			parent, parentOK = x.keys.nodes[pos].key(), true
		}
	}
	keys, err := x.ek.StoredKeys(x.keybuf[:0], model, ev, parent, parentOK)
	x.keybuf = keys[:0]
	switch err {
	case nil:
	case ErrBlockSizeMismatch:
		x.stats.BlockSizeMisses++
		return
	case ErrUnknownParent:
		x.stats.UnknownParents++
		return
	default:
		x.stats.Malformed++
		return
	}
	for i, h := range ev.BlockHashes {
		k := keys[i]
		hm := mixHash(h, ns)
		pos := x.keys.find(k)
		if pos < 0 {
			if !x.roomForNode() {
				x.stats.Full++
				return
			}
			pos = x.keys.insert(k, x.maybeStale == 0)
			if _, p := x.findHash(hm); p >= 0 {
				x.stats.Conflicts++ // the hash names another block: keep it ours
				x.setExtra(id, hm, pos)
			} else {
				x.roomForHash()
				x.hashes.insert(hm, pos)
			}
		} else {
			p, _, viaExtra := x.resolve(id, hm)
			// hm may name a block the endpoint already holds under another
			// name, one of them its own mapping.
			if x.holds(id, pos) && (p != pos || !viaExtra && len(x.eps[id].extra) > 0) {
				x.eps[id].aliased = true
			}
			if p != pos {
				if p >= 0 {
					x.stats.Conflicts++
				}
				x.setExtra(id, hm, pos)
			}
		}
		x.hold(id, pos, tier)
		x.stats.BlocksStored++
	}
}

// storeExact applies a BlockStored event under HashSHA256CBOR: the engine's
// hashes are the keys.
func (x *EventIndex) storeExact(id uint32, ev *Event) {
	tier := TierOf(ev.Medium)
	for _, h := range ev.BlockHashes {
		k := normKey(h)
		pos := x.keys.find(k)
		if pos < 0 {
			if !x.roomForNode() {
				x.stats.Full++
				return
			}
			pos = x.keys.insert(k, x.maybeStale == 0)
		}
		x.hold(id, pos, tier)
		x.stats.BlocksStored++
	}
}

// remove applies a BlockRemoved event.
func (x *EventIndex) remove(id uint32, ns uint64, ev *Event) {
	tier := TierOf(ev.Medium)
	for _, h := range ev.BlockHashes {
		var (
			pos, slot int
			viaExtra  bool
			hm        uint64
		)
		if x.exact {
			pos, slot = x.keys.find(normKey(h)), -1
		} else {
			hm = mixHash(h, ns)
			pos, slot, viaExtra = x.resolve(id, hm)
		}
		if pos < 0 {
			x.stats.UnknownRemoves++
			continue
		}
		left, died := x.release(id, pos, tier)
		if left {
			x.dropExtra(id, hm, pos, viaExtra)
		}
		if died {
			if slot >= 0 {
				x.hashes.kill(slot)
			} else if !x.exact {
				x.maybeStale++ // its shared mapping, if any, is left behind
			}
		}
		x.stats.BlocksRemoved++
	}
}

// clear forgets every block endpoint id holds.
func (x *EventIndex) clear(id uint32) {
	x.stats.Clears++
	ep := &x.eps[id]
	ep.extra, ep.aliased = nil, false
	if ep.size == 0 {
		return
	}
	g, c := 2*id, 2*id+1
	for i := range x.keys.nodes {
		n := &x.keys.nodes[i]
		if n.set == 0 || n.set == deadSet {
			continue
		}
		hasG, hasC := x.sets.has(n.set, g), x.sets.has(n.set, c)
		if !hasG && !hasC {
			continue
		}
		if hasG {
			n.set = x.sets.change(n.set, g, false)
		}
		if hasC {
			n.set = x.sets.change(n.set, c, false)
		}
		x.entries--
		if n.set == 0 {
			x.keys.kill(i)
			if !x.exact {
				x.maybeStale++
			}
		}
	}
	ep.size = 0
	if x.keys.dead > x.keys.live && x.keys.dead > minTableSize {
		x.rebuild() // give the memory back
	}
}

// resolve finds the node an engine hash of endpoint id names: the
// endpoint's own mapping first, then the shared one. slot is the shared
// mapping's slot when that was used.
func (x *EventIndex) resolve(id uint32, hm uint64) (pos, slot int, viaExtra bool) {
	if m := x.eps[id].extra; m != nil {
		if p, ok := m[hm]; ok {
			return int(p), -1, true
		}
	}
	slot, pos = x.findHash(hm)
	return pos, slot, false
}

// findHash finds the shared mapping of hm, dropping the stale mappings of
// dead blocks it meets on the way.
func (x *EventIndex) findHash(hm uint64) (slot, pos int) {
	for {
		slot, pos = x.hashes.find(hm)
		if pos < 0 || x.keys.nodes[pos].live() {
			return slot, pos
		}
		x.hashes.kill(slot)
		x.maybeStale = max(0, x.maybeStale-1)
	}
}

func (x *EventIndex) setExtra(id uint32, hm uint64, pos int) {
	ep := &x.eps[id]
	if ep.extra == nil {
		ep.extra = map[uint64]uint32{}
	}
	ep.extra[hm] = uint32(pos)
}

// dropExtra drops the endpoint's own mappings of the block at pos, which it
// just left: hm's if the removal resolved through it, and every other one
// if the endpoint named the block by more than one hash.
func (x *EventIndex) dropExtra(id uint32, hm uint64, pos int, viaExtra bool) {
	ep := &x.eps[id]
	if viaExtra {
		delete(ep.extra, hm)
	}
	if ep.aliased {
		for h, p := range ep.extra {
			if int(p) == pos {
				delete(ep.extra, h)
			}
		}
	}
}

// holds reports whether endpoint id holds the block at pos in any tier.
func (x *EventIndex) holds(id uint32, pos int) bool {
	s := x.keys.nodes[pos].set
	return x.sets.has(s, 2*id) || x.sets.has(s, 2*id+1)
}

// hold adds (endpoint id, tier) to the node at pos.
func (x *EventIndex) hold(id uint32, pos int, tier Tier) {
	n := &x.keys.nodes[pos]
	b := 2*id + uint32(tier)
	if x.sets.has(n.set, b) {
		return
	}
	had := x.sets.has(n.set, b^1)
	n.set = x.sets.change(n.set, b, true)
	if !had {
		x.entries++
		x.eps[id].size++
	}
}

// release removes (endpoint id, tier) from the node at pos. left reports
// that the endpoint no longer holds the block in any tier, died that nobody
// does.
func (x *EventIndex) release(id uint32, pos int, tier Tier) (left, died bool) {
	n := &x.keys.nodes[pos]
	b := 2*id + uint32(tier)
	if !x.sets.has(n.set, b) {
		return false, false
	}
	n.set = x.sets.change(n.set, b, false)
	if x.sets.has(n.set, b^1) {
		return false, false
	}
	x.entries--
	x.eps[id].size--
	if n.set == 0 {
		x.keys.kill(pos)
		return true, true
	}
	return true, false
}

// roomForNode makes room for one more node, rebuilding the tables when
// needed; false when the index is at its size limit.
func (x *EventIndex) roomForNode() bool {
	if !x.keys.full() {
		return true
	}
	if tableSize(x.keys.live) > maxNodes {
		return false
	}
	x.rebuild()
	return true
}

func (x *EventIndex) roomForHash() {
	if x.hashes.full() {
		x.hashes.rebuild(nil)
	}
}

// rebuild re-places the live nodes into a table sized for them (64% full)
// and moves every mapping to the new positions, dropping mappings of dead
// nodes.
func (x *EventIndex) rebuild() {
	old := x.keys.nodes
	x.keys = keyTable{nodes: make([]enode, tableSize(x.keys.live))}
	x.maybeStale = 0
	moved := make([]int32, len(old))
	for i := range old {
		moved[i] = -1
		if old[i].live() {
			p := x.keys.insert(old[i].key(), false)
			x.keys.nodes[p].set = old[i].set
			moved[i] = int32(p)
		}
	}
	x.hashes.rebuild(func(pos int) int { return int(moved[pos]) })
	for i := range x.eps {
		for hm, p := range x.eps[i].extra {
			if q := moved[p]; q >= 0 {
				x.eps[i].extra[hm] = uint32(q)
			} else {
				delete(x.eps[i].extra, hm)
			}
		}
	}
}

// mixHash places an engine hash in its model's namespace.
func mixHash(h, ns uint64) uint64 { return spread(h ^ ns) }

// littleEndian: token ids can be hashed in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// tokenBytes returns the token ids as 4 little-endian bytes each: a view of
// ids on little-endian machines, else appended to buf.
func tokenBytes(ids []uint32, buf []byte) []byte {
	if len(ids) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids))
	}
	for _, id := range ids {
		buf = binary.LittleEndian.AppendUint32(buf, id)
	}
	return buf
}
