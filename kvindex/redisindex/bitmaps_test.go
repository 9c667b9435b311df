package redisindex

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestBitmapsAgainstBytes: random sets and clears of bits on both sides of
// the 64-bit boundary, and puts, leave bitmaps equal to plain byte strings
// in the server's encoding, bit by bit and block by block.
func TestBitmapsAgainstBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := newBitmaps(0)
	ref := map[uint64][]byte{}
	both := 0 // steps with small and wide bitmaps
	refSet := func(key uint64, pos int, on bool) {
		v := append([]byte(nil), ref[key]...)
		for len(v) <= pos/8 {
			v = append(v, 0)
		}
		if on {
			v[pos/8] |= 1 << (pos % 8)
		} else {
			v[pos/8] &^= 1 << (pos % 8)
		}
		for len(v) > 0 && v[len(v)-1] == 0 {
			v = v[:len(v)-1]
		}
		if len(v) == 0 {
			delete(ref, key)
		} else {
			ref[key] = v
		}
	}
	for step := range 20000 {
		key := uint64(r.IntN(40))
		pos := r.IntN(64) // mostly small bitmaps, some wide
		if r.IntN(8) == 0 {
			pos = 64 + r.IntN(16)
		}
		switch op := r.IntN(10); {
		case op < 5:
			b.set(key, pos, true)
			refSet(key, pos, true)
		case op < 9:
			b.set(key, pos, false)
			refSet(key, pos, false)
		default:
			v := ref[uint64(r.IntN(40))]
			b.put(key, append([]byte(nil), v...))
			if len(v) == 0 {
				delete(ref, key)
			} else {
				ref[key] = append([]byte(nil), v...)
			}
		}
		if len(b.small) > 0 && len(b.wide) > 0 {
			both++
		}
		if b.len() != len(ref) {
			t.Fatalf("step %d: %d blocks, want %d", step, b.len(), len(ref))
		}
		for k := range uint64(40) {
			if got, want := b.get(k), ref[k]; !bytes.Equal(got, want) {
				t.Fatalf("step %d: block %d is %x, want %x", step, k, got, want)
			}
			for p := 0; p < 96; p += 2 {
				var want byte
				if v := ref[k]; p/8 < len(v) {
					want = v[p/8] >> (p % 8) & 3
				}
				if got := b.bits(k, p); got != want {
					t.Fatalf("step %d: block %d bits %d = %b, want %b", step, k, p, got, want)
				}
			}
		}
	}
	if both < 1000 {
		t.Fatalf("small and wide bitmaps side by side in %d steps: the run did not cover both", both)
	}
}
