package redisindex

// bitmaps is a mirror's copy of a holders hash: block → bitmap of holders,
// bit p being bit p%8 of byte p/8 as the server keeps them. A bitmap of at
// most 8 bytes — ids below 64 in the approximate index, 32 in the precise
// one, every bitmap of a pool of that size — is held as a uint64 (bit p
// is bit p), in a map without pointers for the collector to scan; wider
// ones as bytes. A block is in one map or the other, and in neither when
// nobody holds it.
type bitmaps struct {
	small map[uint64]uint64
	wide  map[uint64][]byte
}

func newBitmaps(n int) bitmaps {
	return bitmaps{small: make(map[uint64]uint64, n), wide: map[uint64][]byte{}}
}

// len returns the number of blocks somebody holds.
func (b *bitmaps) len() int { return len(b.small) + len(b.wide) }

// put sets block key's bitmap to v, in the server's encoding (no trailing
// zero byte; "" for nobody).
func (b *bitmaps) put(key uint64, v []byte) {
	delete(b.small, key)
	delete(b.wide, key)
	switch {
	case len(v) == 0:
	case len(v) <= 8:
		var x uint64
		for i, c := range v {
			x |= uint64(c) << (8 * i)
		}
		b.small[key] = x
	default:
		b.wide[key] = v
	}
}

// get returns block key's bitmap in the server's encoding (for tests and
// changes of width).
func (b *bitmaps) get(key uint64) []byte {
	if w, ok := b.wide[key]; ok {
		return w
	}
	x := b.small[key]
	var v []byte
	for ; x != 0; x >>= 8 {
		v = append(v, byte(x))
	}
	return v
}

// bitmap returns block key's bitmap as held: small, or wide when not nil.
func (b *bitmaps) bitmap(key uint64) (small uint64, wide []byte) {
	if x, ok := b.small[key]; ok || len(b.wide) == 0 {
		return x, nil
	}
	return 0, b.wide[key]
}

// bitsOf returns the two bits at pos and pos+1 (pos even: both in one
// byte), low bit first, of a bitmap as bitmap returns it; the approximate
// index uses the low one only.
func bitsOf(small uint64, wide []byte, pos int) byte {
	if wide == nil {
		if pos >= 64 {
			return 0
		}
		return byte(small>>pos) & 3
	}
	if pos/8 >= len(wide) {
		return 0
	}
	return wide[pos/8] >> (pos % 8) & 3
}

// bits returns the two bits of block key's bitmap at pos and pos+1.
func (b *bitmaps) bits(key uint64, pos int) byte {
	x, w := b.bitmap(key)
	return bitsOf(x, w, pos)
}

// set sets (on) or clears bit pos of block key's bitmap.
func (b *bitmaps) set(key uint64, pos int, on bool) {
	if _, wide := b.wide[key]; !wide && pos < 64 {
		x := b.small[key]
		if on {
			x |= 1 << pos
		} else {
			x &^= 1 << pos
		}
		if x == 0 {
			delete(b.small, key)
		} else {
			b.small[key] = x
		}
		return
	}
	v := b.get(key)
	bi, mask := pos/8, byte(1)<<(pos%8)
	if on {
		if len(v) <= bi {
			w := make([]byte, bi+1)
			copy(w, v)
			v = w
		}
		v[bi] |= mask
	} else if bi < len(v) {
		v[bi] &^= mask
		for len(v) > 0 && v[len(v)-1] == 0 {
			v = v[:len(v)-1]
		}
	}
	b.put(key, v)
}
