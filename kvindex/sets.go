package kvindex

import "slices"

// sets interns the endpoint sets of the nodes: every node holding the same
// endpoints refers to one bitset, so a block costs 4 bytes for its holders
// whatever their number, and a lookup that sees the same set id twice knows
// nothing changed. Set 0 is the empty set; ids of freed sets are reused.
type sets struct {
	words  []uint64 // set i is words[i*stride:][:stride], bit e = endpoint e
	stride int
	refs   []uint32 // nodes referring to each set; 0 = free
	keys   []uint64 // content key of each set
	byKey  map[uint64]uint32
	free   []uint32
	tmp    []uint64
	memo   setChange // the last change, as consecutive blocks often repeat it
}

// setChange is a memoised sets.change: from ± ep = to.
type setChange struct {
	from, ep, to uint32
	add, ok      bool
}

func newSets() sets {
	return sets{words: make([]uint64, 1), stride: 1, refs: []uint32{0}, keys: []uint64{0},
		byKey: map[uint64]uint32{}, tmp: make([]uint64, 1)}
}

func (t *sets) bits(s uint32) []uint64 { return t.words[int(s)*t.stride:][:t.stride] }

// has reports whether endpoint ep is in set s.
func (t *sets) has(s, ep uint32) bool {
	return t.words[int(s)*t.stride+int(ep>>6)]&(1<<(ep&63)) != 0
}

// reserve makes room for endpoint id ep.
func (t *sets) reserve(ep uint32) {
	stride := int(ep>>6) + 1
	if stride <= t.stride {
		return
	}
	words := make([]uint64, len(t.refs)*stride)
	for s := range t.refs {
		copy(words[s*stride:], t.bits(uint32(s)))
	}
	t.words, t.stride, t.tmp = words, stride, make([]uint64, stride)
}

// change returns the set s with endpoint ep added (add) or removed, taking a
// reference to the result and dropping one to s (a node moving sets).
func (t *sets) change(s, ep uint32, add bool) uint32 {
	m := &t.memo
	if !m.ok || m.from != s || m.ep != ep || m.add != add {
		w := t.tmp
		copy(w, t.bits(s))
		if add {
			w[ep>>6] |= 1 << (ep & 63)
		} else {
			w[ep>>6] &^= 1 << (ep & 63)
		}
		*m = setChange{s, ep, t.intern(w), add, true}
	}
	to := m.to
	if to != 0 {
		t.refs[to]++
	}
	t.release(s)
	return to
}

// release drops a reference to s, freeing it at zero.
func (t *sets) release(s uint32) {
	if s == 0 {
		return
	}
	if t.refs[s]--; t.refs[s] > 0 {
		return
	}
	if t.byKey[t.keys[s]] == s {
		delete(t.byKey, t.keys[s])
	}
	t.free = append(t.free, s)
	t.memo.ok = false // s may come back with other contents
}

// intern returns the id of the set with bits w, creating it (with no
// references) if needed. Two sets with the same key but other bits (a 2⁻⁶⁴
// event) are both kept; only the first is found by key.
func (t *sets) intern(w []uint64) uint32 {
	if isZero(w) {
		return 0
	}
	var key uint64
	for i, x := range w {
		if x != 0 { // zero words add nothing: the key does not depend on stride
			key += mix(x ^ uint64(i)*0x9e3779b97f4a7c15)
		}
	}
	s, ok := t.byKey[key]
	if ok && slices.Equal(t.bits(s), w) {
		return s
	}
	var id uint32
	if n := len(t.free); n > 0 {
		id, t.free = t.free[n-1], t.free[:n-1]
	} else {
		id = uint32(len(t.refs))
		t.refs, t.keys = append(t.refs, 0), append(t.keys, 0)
		t.words = append(t.words, make([]uint64, t.stride)...)
	}
	copy(t.bits(id), w)
	t.keys[id] = key
	if !ok {
		t.byKey[key] = id
	}
	return id
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func isZero(w []uint64) bool {
	for _, x := range w {
		if x != 0 {
			return false
		}
	}
	return true
}
