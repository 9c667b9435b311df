package kvindex

import (
	"math/bits"
	"slices"
	"sync"
)

// DefaultCapacity is the number of index blocks an endpoint may hold when
// nothing better is known (SPEC §5.1 lruCapacityPerServer).
const DefaultCapacity = 31_250

// PrefixIndexConfig configures a PrefixIndex.
type PrefixIndexConfig struct {
	// DefaultCapacity is the number of index blocks each endpoint may hold
	// until SetCapacity says otherwise. Zero or less means DefaultCapacity.
	DefaultCapacity int
}

// PrefixIndex is the approximate prefix-cache index: for each block hash, the
// endpoints believed to hold it, learned from where requests were sent rather
// than from the engines. See the package documentation for the model.
//
// Match may run concurrently with any method; Add, SetCapacity and
// RemoveEndpoint serialise with each other and with Match.
type PrefixIndex struct {
	mu         sync.RWMutex
	defaultCap int
	blocks     blockTable
	sets       sets
	segs       []segment         // [0] unused
	freeSeg    uint32            // first free segment, linked through older
	heads      map[uint64]uint32 // node<<32 | endpoint → segment starting there
	eps        []endpointState   // by endpoint id
	ids        map[string]uint32 // endpoint name → id
	freeIDs    []uint32
	entries    int
}

// endpointState is the index's state for one endpoint.
type endpointState struct {
	name           string
	capacity, size int    // in blocks
	oldest, newest uint32 // ends of the endpoint's segment list
}

// segment is the run of blocks that one Add credited and that no later Add
// of the same endpoint has refreshed since: the path of n blocks ending at
// tail. Its first block, the head, is found in PrefixIndex.heads. The
// segments of an endpoint partition the blocks it holds and are kept oldest
// first; eviction takes the tail of the oldest one.
type segment struct {
	tail, n      uint32
	older, newer uint32 // neighbours in the endpoint's list (0 = none)
}

// NewPrefixIndex returns an empty index.
func NewPrefixIndex(cfg PrefixIndexConfig) *PrefixIndex {
	if cfg.DefaultCapacity <= 0 {
		cfg.DefaultCapacity = DefaultCapacity
	}
	return &PrefixIndex{
		defaultCap: cfg.DefaultCapacity,
		sets:       newSets(),
		segs:       make([]segment, 1),
		heads:      map[uint64]uint32{},
		ids:        map[string]uint32{},
	}
}

// CapacityFromEngine converts an engine's KV-cache size — gpuBlocks blocks of
// engineBlockSize tokens — into blocks of indexBlockTokens tokens, at least
// 1. It returns 0, which SetCapacity reads as the default, when an input is
// not positive (the engine has not said).
func CapacityFromEngine(engineBlockSize, gpuBlocks, indexBlockTokens int) int {
	if engineBlockSize <= 0 || gpuBlocks <= 0 || indexBlockTokens <= 0 {
		return 0
	}
	return max(1, engineBlockSize*gpuBlocks/indexBlockTokens)
}

// SetCapacity sets how many index blocks endpoint may hold, evicting its
// least recently used blocks if it holds more. Zero or less restores the
// index's default capacity.
func (x *PrefixIndex) SetCapacity(endpoint string, blocks int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if blocks <= 0 {
		blocks = x.defaultCap
	}
	id := x.intern(endpoint)
	x.eps[id].capacity = blocks
	x.evict(id)
}

// Add credits endpoint with the prefix chain hashes[0..n) (hashes[0] is block
// 0; see HashPrompt), as the engine will hold it once it serves the request.
// All n blocks become the endpoint's most recently used; blocks used last
// together are evicted deepest first, so the tails of older prefixes go
// first. Only the first
// capacity blocks are credited, and none from a block whose hash is known
// with a different previous block (a hash collision or a chain that is not
// one).
func (x *PrefixIndex) Add(endpoint string, hashes []uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	id := x.intern(endpoint)
	hashes = hashes[:min(len(hashes), x.eps[id].capacity)]

	// The blocks the endpoint already holds are a prefix of the chain, cut
	// into runs each owned by an older segment (a run starts where a segment
	// has its head); take them over from their owners.
	var (
		d      int
		first  uint32 // node of block 0
		parent uint32 // node of block d-1
		owner  uint32 // segment owning the run being taken over
		taken  uint32 // blocks taken from owner
	)
	for ; d < len(hashes); d++ {
		v := x.blocks.find(hashes[d])
		if v == 0 {
			break
		}
		n := x.blocks.at(v)
		if n.parentNode() != parent || !x.sets.has(n.set, id) {
			break
		}
		if n.parent&mayHead != 0 {
			if s, ok := x.heads[headKey(v, id)]; ok {
				delete(x.heads, headKey(v, id))
				x.cede(id, owner, taken)
				owner, taken = s, 0
			}
		}
		taken++
		parent = v
		if d == 0 {
			first = v
		}
	}
	x.cede(id, owner, taken)

	// Credit the rest.
	for ; d < len(hashes); d++ {
		v := x.blocks.find(hashes[d])
		if v == 0 {
			v = x.blocks.insert(hashes[d], parent, x.sets.change(0, id, true))
		} else if n := x.blocks.at(v); n.parentNode() == parent && !x.sets.has(n.set, id) {
			n.set = x.sets.change(n.set, id, true)
		} else {
			break // not the chain it claims to be
		}
		parent = v
		if d == 0 {
			first = v
		}
		x.eps[id].size++
		x.entries++
	}
	if d == 0 {
		return
	}

	// The new segment owns all d blocks.
	s := x.newSegment(segment{tail: parent, n: uint32(d)})
	x.pushNewest(id, s)
	x.setHead(first, id, s)
	x.evict(id)
}

// cede gives the first taken blocks of segment s of endpoint id to a newer
// segment.
func (x *PrefixIndex) cede(id, s, taken uint32) {
	if s == 0 {
		return
	}
	seg := &x.segs[s]
	if taken >= seg.n {
		x.unlink(id, s)
		return
	}
	seg.n -= taken
	head := seg.tail
	for range seg.n - 1 {
		head = x.blocks.at(head).parentNode()
	}
	x.setHead(head, id, s)
}

// evict drops the endpoint's least recently used blocks, tails first, until
// it holds no more than its capacity.
func (x *PrefixIndex) evict(id uint32) {
	ep := &x.eps[id]
	for ep.size > ep.capacity && ep.oldest != 0 {
		s := ep.oldest
		seg := &x.segs[s]
		v := seg.tail
		n := x.blocks.at(v)
		seg.tail = n.parentNode()
		if n.set = x.sets.change(n.set, id, false); n.set == 0 {
			x.blocks.remove(v)
		}
		ep.size--
		x.entries--
		if seg.n--; seg.n == 0 { // v was the head
			delete(x.heads, headKey(v, id))
			x.unlink(id, s)
		}
	}
}

// RemoveEndpoint forgets endpoint and every block credited to it. Its name
// may come back later; it starts empty.
func (x *PrefixIndex) RemoveEndpoint(endpoint string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	id, ok := x.ids[endpoint]
	if !ok {
		return
	}
	x.eps[id].capacity = 0
	x.evict(id)
	x.eps[id] = endpointState{}
	delete(x.ids, endpoint)
	x.freeIDs = append(x.freeIDs, id)
}

// Match sets matched[i] to the number of consecutive blocks, from block 0,
// of the chain hashes that endpoints[i] holds (0 for an endpoint the index
// does not know). The walk stops at the first block no endpoint holds. It
// allocates nothing in the steady state and panics if matched is shorter
// than endpoints.
func (x *PrefixIndex) Match(hashes []uint64, endpoints []string, matched []int) {
	matched = matched[:len(endpoints)]
	sc := matchScratches.Get().(*matchScratch)
	defer matchScratches.Put(sc)
	x.mu.RLock()
	defer x.mu.RUnlock()
	sc.fit(len(x.eps), x.sets.stride)

	// live holds the ids still matching; pos[id] is where id first appears
	// in endpoints. A repeated endpoint gets -1-(first position) for now.
	live := sc.live
	for i, name := range endpoints {
		matched[i] = 0
		id, ok := x.ids[name]
		switch {
		case !ok:
		case sc.pos[id] >= 0:
			matched[i] = -1 - int(sc.pos[id])
		default:
			sc.pos[id] = int32(i)
			live[id>>6] |= 1 << (id & 63)
		}
	}
	copy(sc.asked, live)
	var (
		d       int
		parent  uint32
		set     uint32 // holders of block d-1
		anyLive = !isZero(live)
	)
	for ; d < len(hashes) && anyLive; d++ {
		v := x.blocks.find(hashes[d])
		if v == 0 {
			break
		}
		n := x.blocks.at(v)
		if n.parentNode() != parent {
			break
		}
		parent = v
		if n.set == set {
			continue // same holders as the block before
		}
		set = n.set
		anyLive = false
		for j, w := range x.sets.bits(set) {
			sc.settle(j, live[j]&^w, d, matched)
			live[j] &= w
			anyLive = anyLive || live[j] != 0
		}
	}
	for j, w := range live { // these hold every block walked
		sc.settle(j, w, d, matched)
		live[j] = 0
	}
	for i, m := range matched {
		if m < 0 {
			matched[i] = matched[-1-m]
		}
	}
	sc.forget()
}

// matchScratch is Match's working memory, indexed by endpoint id. Between
// calls pos is all -1 and the bitsets are empty.
type matchScratch struct {
	pos         []int32  // position in Match's endpoints
	live, asked []uint64 // bitsets: still matching, asked about
}

var matchScratches = sync.Pool{New: func() any { return new(matchScratch) }}

func (sc *matchScratch) fit(ids, words int) {
	for len(sc.pos) < ids {
		sc.pos = append(sc.pos, -1)
	}
	if len(sc.live) < words {
		sc.live, sc.asked = make([]uint64, words), make([]uint64, words)
	}
}

// settle sets the match of the ids in word j of a bitset to d.
func (sc *matchScratch) settle(j int, w uint64, d int, matched []int) {
	for ; w != 0; w &= w - 1 {
		matched[sc.pos[j<<6|bits.TrailingZeros64(w)]] = d
	}
}

// forget restores pos and asked for the next call.
func (sc *matchScratch) forget() {
	for j, w := range sc.asked {
		for ; w != 0; w &= w - 1 {
			sc.pos[j<<6|bits.TrailingZeros64(w)] = -1
		}
		sc.asked[j] = 0
	}
}

// Endpoints appends the names of the endpoints the index knows, sorted, to
// dst. Add registers endpoints it does not know, so one removed while its
// request was in flight can come back; a caller can diff this list with its
// pool and remove the strays.
func (x *PrefixIndex) Endpoints(dst []string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := len(dst)
	for name := range x.ids {
		dst = append(dst, name)
	}
	slices.Sort(dst[n:])
	return dst
}

// Len returns the number of (block, endpoint) entries.
func (x *PrefixIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.entries
}

// intern returns the id of the named endpoint, registering it if needed.
func (x *PrefixIndex) intern(name string) uint32 {
	if id, ok := x.ids[name]; ok {
		return id
	}
	var id uint32
	if n := len(x.freeIDs); n > 0 {
		id, x.freeIDs = x.freeIDs[n-1], x.freeIDs[:n-1]
	} else {
		id = uint32(len(x.eps))
		x.eps = append(x.eps, endpointState{})
		x.sets.reserve(id)
	}
	x.eps[id] = endpointState{name: name, capacity: x.defaultCap}
	x.ids[name] = id
	return id
}

func headKey(node, ep uint32) uint64 { return uint64(node)<<32 | uint64(ep) }

func (x *PrefixIndex) setHead(node, ep, s uint32) {
	x.heads[headKey(node, ep)] = s
	x.blocks.at(node).parent |= mayHead
}

func (x *PrefixIndex) newSegment(seg segment) uint32 {
	s := x.freeSeg
	if s == 0 {
		s = uint32(len(x.segs))
		x.segs = append(x.segs, seg)
		return s
	}
	x.freeSeg = x.segs[s].older
	x.segs[s] = seg
	return s
}

// pushNewest appends segment s to the endpoint's list.
func (x *PrefixIndex) pushNewest(id, s uint32) {
	ep := &x.eps[id]
	x.segs[s].older = ep.newest
	if ep.newest != 0 {
		x.segs[ep.newest].newer = s
	} else {
		ep.oldest = s
	}
	ep.newest = s
}

// unlink removes segment s from endpoint id's list and frees it.
func (x *PrefixIndex) unlink(id, s uint32) {
	seg := &x.segs[s]
	ep := &x.eps[id]
	if seg.older != 0 {
		x.segs[seg.older].newer = seg.newer
	} else {
		ep.oldest = seg.newer
	}
	if seg.newer != 0 {
		x.segs[seg.newer].older = seg.older
	} else {
		ep.newest = seg.older
	}
	*seg = segment{older: x.freeSeg}
	x.freeSeg = s
}
