package sim

import (
	"math/rand/v2"
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
