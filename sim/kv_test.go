package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The open-addressing table agrees with a map under random puts and
// deletes, including colliding keys.
func TestTable(t *testing.T) {
	tb := newTable(1000)
	ref := map[uint64]int32{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		k := uint64(rng.IntN(2000)) << 10 // many keys share a home slot
		if rng.IntN(2) == 0 && len(ref) < 1000 {
			_, had := ref[k]
			if added := tb.put(k, int32(i)); added == had {
				t.Fatalf("put %d: added %v, had %v", k, added, had)
			}
			if !had {
				ref[k] = int32(i)
			}
		} else {
			tb.del(k)
			delete(ref, k)
		}
		if tb.len() != len(ref) {
			t.Fatalf("len %d, want %d", tb.len(), len(ref))
		}
		if i%97 != 0 {
			continue
		}
		for rk, rv := range ref {
			if got := tb.get(rk); got != rv {
				t.Fatalf("get %d = %d, want %d", rk, got, rv)
			}
		}
	}
}

// match, with its child hints and the re-validation of an earlier result,
// finds exactly the leading cached run that table lookups alone find, while
// requests take, register, release and evict blocks at random.
func TestMatchAgreesWithTable(t *testing.T) {
	c := newKVCache(64)
	rng := rand.New(rand.NewPCG(3, 4))
	naive := func(hashes []uint64) []int32 {
		var ids []int32
		for _, h := range hashes {
			i := c.cached.get(h)
			if i < 0 {
				break
			}
			ids = append(ids, i)
		}
		return ids
	}
	chain := func() []uint64 { // one of a few prefixes, then a random tail
		h := make([]uint64, 2+rng.IntN(10))
		prev := uint64(rng.IntN(3) + 1)
		for k := range h {
			v := uint64(k)
			if k >= 4 {
				v = rng.Uint64()
			}
			prev = mix(prev ^ mix(v+1))
			h[k] = prev
		}
		return h
	}
	var memo []int32
	memoHashes := chain()
	var held [][]int32
	for step := range 5000 {
		if got, want := c.match(memo, memoHashes), naive(memoHashes); !slices.Equal(got, want) {
			t.Fatalf("step %d: re-match %v, want %v", step, got, want)
		} else {
			memo = got
		}
		if rng.IntN(4) == 0 {
			memoHashes, memo = chain(), nil
		}
		switch {
		case len(held) > 0 && (rng.IntN(2) == 0 || c.nfree < 12):
			k := rng.IntN(len(held))
			c.release(held[k])
			held = append(held[:k], held[k+1:]...)
		default:
			hashes := chain()
			ids := c.match(nil, hashes)
			if want := naive(hashes); !slices.Equal(ids, want) {
				t.Fatalf("step %d: match %v, want %v", step, ids, want)
			}
			hit := len(ids)
			c.acquire(ids)
			ids, ok := c.alloc(ids, len(hashes)-hit)
			if !ok {
				c.release(ids)
				continue
			}
			for i := hit; i < len(hashes); i++ {
				c.register(ids[i], parentOf(ids, i), hashes[i])
			}
			held = append(held, ids)
		}
	}
}
