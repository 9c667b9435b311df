package redisindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

// TestBatchesMatchSequentialUpdates: a batch of updates written at once —
// Adds of an endpoint merged into one — leaves the index as the updates
// applied one by one leave a kvindex.PrefixIndex.
func TestBatchesMatchSequentialUpdates(t *testing.T) {
	srv := redistest.Start(t)
	x, err := NewPrefixIndex(Config{Address: srv.Addr, KeyPrefix: "batch:"}, kvindex.PrefixIndexConfig{DefaultCapacity: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	ref := kvindex.NewPrefixIndex(kvindex.PrefixIndexConfig{DefaultCapacity: 30})
	r := rand.New(rand.NewPCG(1, 2))
	chains := [][]uint64{kvindextest.Chain(100, 25)}
	for i := 1; i < 8; i++ {
		base := chains[r.IntN(len(chains))]
		chains = append(chains, slices.Concat(base[:r.IntN(len(base))], kvindextest.Chain(uint64(100+i), 1+r.IntN(20))))
	}
	eps := []string{"a", "b"}
	got, want := make([]int, 2), make([]int, 2)
	merged := 0
	for round := range 60 {
		var batch []prefixOp
		for range 1 + r.IntN(12) {
			ep := eps[r.IntN(2)]
			switch op := r.IntN(12); {
			case op < 10:
				c := chains[r.IntN(len(chains))]
				c = c[:1+r.IntN(len(c))]
				ref.Add(ep, c)
				batch = append(batch, prefixOp{kind: 'a', endpoint: ep, chain: c})
			case op < 11:
				n := r.IntN(40)
				ref.SetCapacity(ep, n)
				batch = append(batch, prefixOp{kind: 'c', endpoint: ep, capacity: n})
			default:
				ref.RemoveEndpoint(ep)
				batch = append(batch, prefixOp{kind: 'r', endpoint: ep})
			}
		}
		merged += len(batch) - len(coalesce(slices.Clone(batch)))
		x.writeBatch(context.Background(), batch)
		for _, c := range chains {
			if err := x.MatchContext(context.Background(), c, eps, got); err != nil {
				t.Fatal(err)
			}
			ref.Match(c, eps, want)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: matched %v, want %v (as kvindex.PrefixIndex)", round, got, want)
			}
		}
	}
	if merged == 0 {
		t.Fatal("no Adds were merged: the test tests nothing")
	}
	if st := x.BackendStats(); st.Errors != 0 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
	t.Log(fmt.Sprint(merged, " Adds merged"))
}
