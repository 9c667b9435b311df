package kvindex

// node is one distinct block hash held by at least one endpoint: a vertex of
// the forest of prefixes (block 0s are roots, every other block hangs off the
// block before it).
type node struct {
	lo     uint32 // low half of the block hash: home slot and verification
	set    uint32 // interned set of endpoints holding the block (sets)
	parent uint32 // node of the previous block (0 for block 0), | mayHead
}

const (
	// mayHead in node.parent marks a node that was, and may still be, the
	// first block of a segment (PrefixIndex.heads). It is cleared with the
	// node.
	mayHead  = 1 << 31
	nodeMask = mayHead - 1
)

func (n *node) parentNode() uint32 { return n.parent & nodeMask }

// Slots of blockTable.slots: node index | hash bits 40..63 | displacement.
const (
	slotIdx   = 1<<32 - 1
	slotTag   = (1<<24 - 1) << 32
	slotShift = 56
	slotDisp1 = 1 << slotShift
	maxDisp   = 255
)

const (
	chunkBits  = 13 // nodes per slab chunk: 8192 × 12 B = 96 KiB
	chunkMask  = 1<<chunkBits - 1
	minSlots   = 64
	maxLoadNum = 9  // grow beyond 9/10 full, by a quarter, so that the load
	maxLoadDen = 10 // stays in [0.72, 0.9]: 8 B per slot is ≤ 11.2 B per node
	// Below doubleSlots slots (8 MiB) the table doubles instead: a growing
	// index then moves each entry about once rather than four times, and
	// the memory this costs is small.
	doubleSlots = 1 << 20
)

// blockTable maps a block hash to its node. Nodes live in a chunked slab with
// stable indices (12 bytes each, freed nodes are reused). The hash table is
// Robin Hood open addressing over 8-byte slots holding the node index, 24
// more bits of the hash (so probing rarely touches a node) and the slot's
// distance from its home (so deleting shifts entries back without touching
// nodes). The home slot comes from the hash's low half, kept in the node, so
// a node can be found and deleted knowing only its index. A hash is known by
// 56 of its bits; the index also checks that a block's parent is the block
// before it, so a false match needs a 2⁻⁵⁶ collision under the same parent.
type blockTable struct {
	slots  []uint64
	count  int
	chunks [][]node
	used   uint32 // slab indices handed out so far; index 0 is never used
	free   uint32 // first freed node, linked through node.parent
}

func (t *blockTable) at(i uint32) *node { return &t.chunks[i>>chunkBits][i&chunkMask] }

func (t *blockTable) home(lo uint32) int {
	return int(uint64(lo) * uint64(len(t.slots)) >> 32)
}

// spread mixes all 64 bits of a block hash into every bit (a bijection, so
// no new collisions): the table keys on the low half and 24 high bits, and
// hashes that differ only elsewhere — not xxhash's outputs, but keys a caller
// derived some other way — must not pile up on one home slot.
func spread(h uint64) uint64 { return mix(h) }

// find returns the node of hash h, or 0.
func (t *blockTable) find(h uint64) uint32 {
	if t.count == 0 {
		return 0
	}
	h = spread(h)
	lo, tag := uint32(h), (h>>8)&slotTag
	i := t.home(lo)
	for d := uint64(0); ; d += slotDisp1 {
		s := t.slots[i]
		if s == 0 || s&^(slotIdx|slotTag) < d {
			return 0
		}
		if s&^slotIdx == d|tag && t.at(uint32(s)).lo == lo {
			return uint32(s)
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
}

// insert adds a node for hash h, which must not be present.
func (t *blockTable) insert(h uint64, parent, set uint32) uint32 {
	h = spread(h)
	if (t.count+1)*maxLoadDen > len(t.slots)*maxLoadNum {
		grow := len(t.slots) / 4
		if len(t.slots) < doubleSlots {
			grow = len(t.slots)
		}
		t.resize(max(minSlots, len(t.slots)+grow))
	}
	i := t.free
	if i != 0 {
		t.free = t.at(i).parent
	} else {
		t.used++
		i = t.used
		if int(i>>chunkBits) == len(t.chunks) {
			t.chunks = append(t.chunks, make([]node, 1<<chunkBits))
		}
	}
	*t.at(i) = node{lo: uint32(h), set: set, parent: parent}
	t.place(uint64(i) | (h>>8)&slotTag)
	t.count++
	return i
}

// place puts slot s (displacement 0) into the table, Robin Hood style: an
// entry further from its home than the one in the way takes that place.
func (t *blockTable) place(s uint64) {
	i := t.home(t.at(uint32(s)).lo)
	for {
		cur := t.slots[i]
		if cur == 0 {
			t.slots[i] = s
			return
		}
		if cur>>slotShift < s>>slotShift {
			t.slots[i], s = s, cur
		}
		if s>>slotShift == maxDisp { // never seen in practice; stay correct
			t.resize(len(t.slots) * 2)
			t.place(s &^ (maxDisp << slotShift))
			return
		}
		s += slotDisp1
		if i++; i == len(t.slots) {
			i = 0
		}
	}
}

// remove deletes node i from the table and frees it.
func (t *blockTable) remove(i uint32) {
	j := t.home(t.at(i).lo)
	for range t.slots {
		if uint32(t.slots[j]) == i {
			break
		}
		if j++; j == len(t.slots) {
			j = 0
		}
	}
	for { // shift the entries after j back by one until one is at home
		k := j + 1
		if k == len(t.slots) {
			k = 0
		}
		s := t.slots[k]
		if s>>slotShift == 0 {
			t.slots[j] = 0
			break
		}
		t.slots[j] = s - slotDisp1
		j = k
	}
	*t.at(i) = node{parent: t.free}
	t.free = i
	t.count--
	if len(t.slots) > minSlots && t.count < len(t.slots)/4 {
		t.resize(max(minSlots, t.count*4/3))
	}
}

func (t *blockTable) resize(n int) {
	old := t.slots
	t.slots = make([]uint64, n)
	for _, s := range old {
		if s != 0 {
			t.place(s &^ (maxDisp << slotShift))
		}
	}
}
