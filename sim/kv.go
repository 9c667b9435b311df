package sim

import "sync"

// kvCache is a paged KV cache of a fixed number of blocks with prefix
// caching, as in vLLM: a full block that has been computed is registered
// under the chained hash of its content, so a later request whose prompt
// starts with the same blocks reuses them. A block is referenced by the
// running requests that use it; a block nobody references stays cached on
// the free queue until it is evicted, least recently freed first. A request
// frees its blocks tail first, so the tail of a prefix is evicted before its
// head.
type kvCache struct {
	blocks []kvBlock
	cached table // block hash → block index
	// free is an intrusive doubly linked list of unreferenced blocks
	// (cached or not) in eviction order: head first.
	head, tail int32
	nfree      int
	// fresh is the first block never used: blocks [fresh, len) are free and
	// come before the free list (they evict nothing).
	fresh int32
	// removed collects the hashes of evicted blocks when non-nil (for KV
	// events).
	removed *[]uint64
}

type kvBlock struct {
	hash       uint64
	ref        int32
	prev, next int32 // free-list links; -1 = none
	// child is a hint: the block that held the next block of the last
	// chain registered or matched through this one. match checks it before
	// the table: the blocks of a shared prefix follow each other.
	child  int32
	hashed bool
	// private marks a hashed block that is not in the table: its content
	// is in no other prompt (Request.Unique).
	private bool
	onFree  bool
}

// kvPool recycles caches between runs: a cache is megabytes, and touching
// fresh memory for every configuration's servers costs more than clearing
// a used one.
var kvPool sync.Pool

func newKVCache(n int) *kvCache {
	if c, ok := kvPool.Get().(*kvCache); ok && len(c.blocks) == n {
		clear(c.blocks)
		clear(c.cached.slots)
		c.cached.n = 0
		c.head, c.tail, c.nfree, c.fresh, c.removed = -1, -1, n, 0, nil
		return c
	}
	return &kvCache{blocks: make([]kvBlock, n), cached: newTable(n), head: -1, tail: -1, nfree: n}
}

// recycle returns the cache to the pool; it must not be used afterwards.
func (c *kvCache) recycle() { kvPool.Put(c) }

// used returns the number of referenced blocks.
func (c *kvCache) used() int { return len(c.blocks) - c.nfree }

func (c *kvCache) pushBack(i int32) {
	b := &c.blocks[i]
	b.prev, b.next, b.onFree = c.tail, -1, true
	if c.tail >= 0 {
		c.blocks[c.tail].next = i
	} else {
		c.head = i
	}
	c.tail = i
	c.nfree++
}

func (c *kvCache) unlink(i int32) {
	b := &c.blocks[i]
	if b.prev >= 0 {
		c.blocks[b.prev].next = b.next
	} else {
		c.head = b.next
	}
	if b.next >= 0 {
		c.blocks[b.next].prev = b.prev
	} else {
		c.tail = b.prev
	}
	b.prev, b.next, b.onFree = -1, -1, false
	c.nfree--
}

// match returns the blocks holding the leading cached hashes, up to the
// first one not cached. ids may hold the result of an earlier match for the
// same hashes: the blocks of it that still hold their hashes are kept
// without a table lookup (a request waiting at the head of the queue is
// matched again at every step).
func (c *kvCache) match(ids []int32, hashes []uint64) []int32 {
	for k, i := range ids {
		if b := &c.blocks[i]; !b.hashed || b.hash != hashes[k] {
			ids = ids[:k]
			break
		}
	}
	for k := len(ids); k < len(hashes); k++ {
		h := hashes[k]
		if k > 0 {
			parent := &c.blocks[ids[k-1]]
			if i := parent.child; c.holds(i, h) {
				ids = append(ids, i)
				continue
			}
			i := c.cached.get(h)
			if i < 0 {
				break
			}
			parent.child = i
			ids = append(ids, i)
			continue
		}
		i := c.cached.get(h)
		if i < 0 {
			break
		}
		ids = append(ids, i)
	}
	return ids
}

// holds reports whether block i holds hash h.
func (c *kvCache) holds(i int32, h uint64) bool {
	b := &c.blocks[i]
	return b.hashed && b.hash == h
}

// acquire takes a reference on each of the blocks ids (from match).
func (c *kvCache) acquire(ids []int32) {
	for _, i := range ids {
		b := &c.blocks[i]
		if b.onFree {
			c.unlink(i)
		}
		b.ref++
	}
}

// alloc takes n fresh blocks from the head of the free queue, evicting what
// they cached, and appends them to dst; ok is false (and nothing is taken)
// when fewer than n are free.
func (c *kvCache) alloc(dst []int32, n int) ([]int32, bool) {
	if n > c.nfree {
		return dst, false
	}
	for range n {
		var i int32
		if int(c.fresh) < len(c.blocks) {
			i = c.fresh
			c.fresh++
			c.nfree--
			c.blocks[i].prev, c.blocks[i].next = -1, -1
		} else {
			i = c.head
			c.unlink(i)
		}
		b := &c.blocks[i]
		if b.hashed {
			if !b.private {
				c.cached.del(b.hash)
			}
			b.hashed, b.private = false, false
			if c.removed != nil {
				*c.removed = append(*c.removed, b.hash)
			}
		}
		b.ref = 1
		dst = append(dst, i)
	}
	return dst, true
}

// register records block i as holding the prefix hash h, unless another
// block already does; it reports whether it did. parent is the block of the
// chain's previous hash (-1 for none), whose child hint it sets.
func (c *kvCache) register(i, parent int32, h uint64) bool {
	b := &c.blocks[i]
	if b.hashed || !c.cached.put(h, i) {
		return false
	}
	b.hash, b.hashed = h, true
	if parent >= 0 {
		c.blocks[parent].child = i
	}
	return true
}

// registerPrivate records block i as holding hash h, which no other
// prompt has: cached (evicted and reported as any block) but not indexed.
func (c *kvCache) registerPrivate(i int32, h uint64) {
	b := &c.blocks[i]
	b.hash, b.hashed, b.private = h, true, true
}

// unprivate indexes the private blocks among ids: a preempted request's
// recompute can hit its own blocks, as in the engine.
func (c *kvCache) unprivate(ids []int32) {
	for k, i := range ids {
		if b := &c.blocks[i]; b.private {
			b.private = false
			if !c.cached.put(b.hash, i) {
				b.hashed = false // cannot happen: the content is unique
			}
			if k > 0 {
				c.blocks[ids[k-1]].child = i
			}
		}
	}
}

// release drops one reference from each block, tail first, so the free
// queue evicts a prefix's tail before its head.
func (c *kvCache) release(ids []int32) {
	for k := len(ids) - 1; k >= 0; k-- {
		i := ids[k]
		b := &c.blocks[i]
		b.ref--
		if b.ref == 0 {
			c.pushBack(i)
		}
	}
}

// table is an open-addressing hash table from block hash to block index
// with linear probing and backward-shift deletion, sized at creation to stay
// at most half full. A slot holds key and value together (one cache line
// per probe). Keys are already well-mixed hashes; key 0 is remapped.
type table struct {
	slots []slot
	mask  uint64
	n     int
}

type slot struct {
	key uint64
	val int32
}

// newTable returns a table for at most n entries.
func newTable(n int) table {
	size := 1024
	for size < 2*n {
		size *= 2
	}
	return table{slots: make([]slot, size), mask: uint64(size - 1)}
}

func tkey(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

func (t *table) len() int { return t.n }

// get returns the value of h, or -1.
func (t *table) get(h uint64) int32 {
	k := tkey(h)
	for i := k & t.mask; ; i = (i + 1) & t.mask {
		switch t.slots[i].key {
		case k:
			return t.slots[i].val
		case 0:
			return -1
		}
	}
}

// put adds h → v unless h is present; it reports whether it added. The
// table holds at most the n it was made for.
func (t *table) put(h uint64, v int32) bool {
	k := tkey(h)
	for i := k & t.mask; ; i = (i + 1) & t.mask {
		switch t.slots[i].key {
		case k:
			return false
		case 0:
			t.slots[i] = slot{k, v}
			t.n++
			return true
		}
	}
}

// del removes h, shifting later entries of its probe run back.
func (t *table) del(h uint64) {
	k := tkey(h)
	i := k & t.mask
	for t.slots[i].key != k {
		if t.slots[i].key == 0 {
			return
		}
		i = (i + 1) & t.mask
	}
	t.n--
	for {
		t.slots[i].key = 0
		j := i
		for {
			j = (j + 1) & t.mask
			if t.slots[j].key == 0 {
				return
			}
			home := t.slots[j].key & t.mask
			// Move j back to i unless its home lies cyclically in (i, j].
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				t.slots[i] = t.slots[j]
				i = j
				break
			}
		}
	}
}
