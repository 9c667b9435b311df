package kvindex

// The precise index's storage: every distinct block key is a 12-byte node
// held in place in an open-addressing table (keyTable) whose positions stay
// put until the table is rebuilt, so a second table (hashTable) can map
// engine hashes to node positions in 8 bytes per mapping.

// enode is a block key and the interned set of (endpoint, tier) pairs
// holding it. An empty slot is all zero; a dead one (a node removed since
// the last rebuild) has a zero key and set deadSet.
type enode struct {
	lo, hi, set uint32
}

const deadSet = ^uint32(0)

func (n *enode) key() uint64 { return uint64(n.hi)<<32 | uint64(n.lo) }

func (n *enode) empty() bool { return n.lo == 0 && n.hi == 0 && n.set == 0 }

func (n *enode) live() bool { return n.lo != 0 || n.hi != 0 }

// normKey maps key 0, which marks empty slots, to 1.
func normKey(k uint64) uint64 {
	if k == 0 {
		return 1
	}
	return k
}

// Load bounds of both tables: rebuilt when live and dead entries would pass
// 80%, to 64% live.
const (
	maxLoadPct   = 80
	rebuildPct   = 64
	minTableSize = 64
	// maxNodes bounds keyTable: a hashTable slot keeps a node position + 1
	// in 28 bits, the all-ones value marking a deleted slot.
	maxNodes = 1<<28 - 2
)

// keyTable is a linear-probing table of nodes keyed by block key. Removed
// nodes leave dead slots; a node's position is stable until the table is
// rebuilt. A dead slot is reused only when no engine-hash mapping may still
// point at it (EventIndex.maybeStale).
type keyTable struct {
	nodes      []enode
	live, dead int
}

// home is the slot where key k's probe starts. Keys are hash outputs
// (xxhash64 or SHA-256 bits), uniform in their top bits.
func (t *keyTable) home(k uint64) int {
	return int((k >> 32) * uint64(len(t.nodes)) >> 32)
}

// find returns the position of key k (normalised), or -1.
func (t *keyTable) find(k uint64) int {
	if t.live == 0 {
		return -1
	}
	lo, hi := uint32(k), uint32(k>>32)
	i := t.home(k)
	for {
		n := &t.nodes[i]
		if n.lo == lo && n.hi == hi {
			return i
		}
		if n.empty() {
			return -1
		}
		if i++; i == len(t.nodes) {
			i = 0
		}
	}
}

// insert places key k (normalised, absent) with an empty set in the first
// empty slot from its home, or the first dead one if reuse is set, and
// returns its position. The caller made room.
func (t *keyTable) insert(k uint64, reuse bool) int {
	i := t.home(k)
	for {
		n := &t.nodes[i]
		if n.empty() {
			break
		}
		if reuse && n.set == deadSet {
			t.dead--
			break
		}
		if i++; i == len(t.nodes) {
			i = 0
		}
	}
	t.nodes[i] = enode{lo: uint32(k), hi: uint32(k >> 32)}
	t.live++
	return i
}

// kill marks the node at i dead.
func (t *keyTable) kill(i int) {
	t.nodes[i] = enode{set: deadSet}
	t.live--
	t.dead++
}

// full reports whether one more insert needs a rebuild first.
func (t *keyTable) full() bool {
	return (t.live+t.dead+1)*100 > len(t.nodes)*maxLoadPct
}

// Slots of hashTable: node position + 1 in the top 28 bits, the top 36 bits
// of the mixed engine hash below. A deleted slot is all ones.
const (
	hashBits = 36
	hashMask = 1<<hashBits - 1
	hashDead = ^uint64(0)
)

// hashTable maps mixed engine hashes to node positions by linear probing.
// A hash is known by its top 36 bits (its home slot is derived from them
// too, so the table can be rebuilt from its slots alone): two engine hashes
// are confused with probability 2⁻³⁶ per slot compared, and a confusion can
// only misdirect one event's parent or removal, never break the tables.
type hashTable struct {
	slots      []uint64
	live, dead int
}

func hashTag(hm uint64) uint64 { return hm >> (64 - hashBits) }

func (t *hashTable) home(tag uint64) int { return int(tag * uint64(len(t.slots)) >> hashBits) }

func slotPos(s uint64) int { return int(s>>hashBits) - 1 }

// find returns the slot holding mixed hash hm and its node position, or -1.
func (t *hashTable) find(hm uint64) (slot, pos int) {
	if t.live == 0 {
		return -1, -1
	}
	tag := hashTag(hm)
	i := t.home(tag)
	for {
		s := t.slots[i]
		if s == 0 {
			return -1, -1
		}
		if s != hashDead && s&hashMask == tag {
			return i, slotPos(s)
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
}

// insert maps hm to pos; hm must be absent and the caller made room.
func (t *hashTable) insert(hm uint64, pos int) {
	t.place(uint64(pos+1)<<hashBits | hashTag(hm))
	t.live++
}

func (t *hashTable) place(s uint64) {
	i := t.home(s & hashMask)
	for t.slots[i] != 0 && t.slots[i] != hashDead {
		if i++; i == len(t.slots) {
			i = 0
		}
	}
	if t.slots[i] == hashDead {
		t.dead--
	}
	t.slots[i] = s
}

// kill deletes the slot at i.
func (t *hashTable) kill(i int) {
	t.slots[i] = hashDead
	t.live--
	t.dead++
}

func (t *hashTable) full() bool {
	return (t.live+t.dead+1)*100 > len(t.slots)*maxLoadPct
}

// rebuild re-places the live slots into a table sized for them, mapping
// node positions through remap (nil: unchanged; a result < 0 drops the
// slot).
func (t *hashTable) rebuild(remap func(pos int) int) {
	live := 0
	for _, s := range t.slots {
		if s != 0 && s != hashDead {
			live++
		}
	}
	old := t.slots
	t.slots = make([]uint64, tableSize(live))
	t.live, t.dead = 0, 0
	for _, s := range old {
		if s == 0 || s == hashDead {
			continue
		}
		pos := slotPos(s)
		if remap != nil {
			if pos = remap(pos); pos < 0 {
				continue
			}
		}
		t.place(uint64(pos+1)<<hashBits | s&hashMask)
		t.live++
	}
}

// tableSize is the size of a table rebuilt for n live entries.
func tableSize(n int) int {
	return max(minTableSize, (n+1)*100/rebuildPct)
}
