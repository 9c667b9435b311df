package redisindex_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

// holderState reads the approximate index's keys under prefix: each
// endpoint's set and id, the holders hash and the owners hash.
type holderState struct {
	sets    map[string][]string // endpoint → its blocks
	ids     map[string]int      // endpoint → its id
	holders map[string]string   // block → bitmap
	owners  map[string]string   // id → endpoint
}

func readHolders(t *testing.T, c *redis.Client, prefix string) holderState {
	t.Helper()
	ctx := context.Background()
	st := holderState{sets: map[string][]string{}, ids: map[string]int{}}
	keys, err := c.Keys(ctx, prefix+"a:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ep := strings.TrimPrefix(k, prefix+"a:")
		if ep == "cap" {
			continue
		}
		if st.sets[ep], err = c.ZRange(ctx, k, 0, -1).Result(); err != nil {
			t.Fatal(err)
		}
		id, err := c.Get(ctx, prefix+"ai:"+ep).Int()
		if err != nil {
			t.Fatalf("endpoint %q has a set but no id: %v", ep, err)
		}
		st.ids[ep] = id
	}
	if st.holders, err = c.HGetAll(ctx, prefix+"ah").Result(); err != nil {
		t.Fatal(err)
	}
	if st.owners, err = c.HGetAll(ctx, prefix+"ao").Result(); err != nil {
		t.Fatal(err)
	}
	return st
}

func bitOf(bitmap string, id int) bool {
	return id/8 < len(bitmap) && bitmap[id/8]&(1<<(id%8)) != 0
}

// checkHolders checks that the holders hash mirrors the sets exactly for
// every live id (dropped ids may keep bits until the sweep), that bitmaps
// are canonical (no trailing zero byte, none empty), and that ids are
// unique and owned.
func checkHolders(t *testing.T, st holderState) {
	t.Helper()
	byID := map[int]string{}
	for ep, id := range st.ids {
		if other, ok := byID[id]; ok {
			t.Fatalf("endpoints %q and %q share id %d", ep, other, id)
		}
		byID[id] = ep
		if st.owners[strconv.Itoa(id)] != ep {
			t.Fatalf("id %d of %q is owned by %q", id, ep, st.owners[strconv.Itoa(id)])
		}
	}
	for block, bm := range st.holders {
		if bm == "" || bm[len(bm)-1] == 0 {
			t.Fatalf("block %x: bitmap %x not canonical", block, bm)
		}
	}
	for ep, blocks := range st.sets {
		id := st.ids[ep]
		for _, b := range blocks {
			if !bitOf(st.holders[b], id) {
				t.Fatalf("%q holds block %x, its bit %d is clear", ep, b, id)
			}
		}
		held := map[string]bool{}
		for _, b := range blocks {
			held[b] = true
		}
		for b, bm := range st.holders {
			if bitOf(bm, id) && !held[b] {
				t.Fatalf("block %x has the bit of %q (id %d), which does not hold it", b, ep, id)
			}
		}
	}
}

// endpointNames returns n endpoint names in subnet.
func endpointNames(subnet string, n int) []string {
	eps := make([]string, n)
	for i := range eps {
		eps[i] = fmt.Sprintf("%s.%d:8000", subnet, i)
	}
	return eps
}

// branchingChains returns ten chains, each after the first sharing a
// random prefix of an earlier one and ending in blocks of its own.
func branchingChains(r *rand.Rand, seed uint64) [][]uint64 {
	chains := [][]uint64{kvindextest.Chain(seed, 40)}
	for i := 1; i < 10; i++ {
		base := chains[r.IntN(len(chains))]
		chains = append(chains, slices.Concat(base[:r.IntN(len(base))], kvindextest.Chain(seed+uint64(i), 1+r.IntN(30))))
	}
	return chains
}

// TestHoldersMirrorSets runs random credits, capacity changes and removals
// over more endpoints than a byte of bitmap holds, and checks after each
// batch that the holders hash mirrors the sets and that matches are
// kvindex.PrefixIndex's.
func TestHoldersMirrorSets(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	icfg := kvindex.PrefixIndexConfig{DefaultCapacity: 30}
	x, ref := newPrefix(t, cfg, icfg), kvindex.NewPrefixIndex(icfg)
	r := rand.New(rand.NewPCG(7, 7))
	eps := endpointNames("10.0.0", 12)
	chains := branchingChains(r, 50)
	got, want := make([]int, len(eps)), make([]int, len(eps))
	for step := range 400 {
		ep := eps[r.IntN(len(eps))]
		switch op := r.IntN(30); {
		case op < 26:
			ch := chains[r.IntN(len(chains))]
			ch = ch[:1+r.IntN(len(ch))]
			x.Add(ep, ch)
			ref.Add(ep, ch)
		case op < 29:
			n := r.IntN(40)
			x.SetCapacity(ep, n)
			ref.SetCapacity(ep, n)
		default:
			x.RemoveEndpoint(ep)
			ref.RemoveEndpoint(ep)
		}
		if step%10 != 9 {
			continue
		}
		flush(t, x)
		checkHolders(t, readHolders(t, c, cfg.KeyPrefix))
		for _, ch := range chains {
			if err := x.MatchContext(context.Background(), ch, eps, got); err != nil {
				t.Fatal(err)
			}
			ref.Match(ch, eps, want)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: matched %v, want %v", step, got, want)
			}
		}
	}
}

// TestDroppedIDsSwept: a removed endpoint's id is dropped at once (its
// blocks are not found, a newcomer gets another id), its bits are cleared
// by the sweep and the id is then reused; an endpoint whose data expired
// comes back empty.
func TestDroppedIDsSwept(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.TTL = 400 * time.Millisecond // the sweep runs every 100ms
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	x := newPrefix(t, cfg, kvindex.PrefixIndexConfig{})
	a, b := kvindextest.Chain(1, 6), kvindextest.Chain(2, 6)
	x.Add("a", a)
	x.Add("b", b)
	flush(t, x)
	x.RemoveEndpoint("a")
	x.Add("c", b[:3])
	flush(t, x)
	if got := matchPrefix(t, x, a, "a", "b", "c"); !slices.Equal(got, []int{0, 0, 0}) {
		t.Fatalf("after removing a: matched %v", got)
	}
	st := readHolders(t, c, cfg.KeyPrefix)
	checkHolders(t, st)
	if st.ids["c"] == 0 {
		t.Fatalf("c took a's id before the sweep: %v", st.ids)
	}
	eventually(t, "id 0 not swept", func() bool {
		st = readHolders(t, c, cfg.KeyPrefix)
		_, dropped := st.owners["0"]
		return !dropped
	})
	for blk, bm := range st.holders {
		if bitOf(bm, 0) {
			t.Fatalf("block %x keeps the dropped id's bit", blk)
		}
	}
	x.Add("d", a[:2])
	flush(t, x)
	st = readHolders(t, c, cfg.KeyPrefix)
	checkHolders(t, st)
	if st.ids["d"] != 0 {
		t.Fatalf("the swept id was not reused: %v", st.ids)
	}
	if got := matchPrefix(t, x, a, "a", "d"); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("matched %v, want [0 2]", got)
	}

	// An endpoint whose keys expired while another replica still writes
	// for others: it comes back with a new id and none of its old blocks.
	y := newPrefix(t, cfg, kvindex.PrefixIndexConfig{})
	y.Add("e", a)
	flush(t, y)
	_ = y.Close() // nobody refreshes e any more
	eventually(t, "e did not expire", func() bool { return matchPrefix(t, x, a, "e")[0] == 0 })
	x.Add("e", a[:1])
	flush(t, x)
	if got := matchPrefix(t, x, a, "e", "d"); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("after e expired and came back: matched %v, want [1 2]", got)
	}
	checkHolders(t, readHolders(t, c, cfg.KeyPrefix))
}

// TestEventBatchesAgainstMemory applies random batches of several events —
// stores in both tiers, moves, removals and clears in the middle of a
// batch — to the Redis and in-memory precise indexes over more endpoints
// than a byte of bitmap holds, and compares their matches.
func TestEventBatchesAgainstMemory(t *testing.T) {
	srv := redistest.Start(t)
	x := newEvents(t, testConfig(srv), kvindex.EventIndexConfig{})
	ref, err := kvindex.NewEventIndex(kvindex.EventIndexConfig{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	prompts := make([][]uint32, 4)
	for i := range prompts {
		prompts[i] = kvindextest.Tokens(uint64(i+1), 16*24)
	}
	eps := make([]string, 6) // 12 bits: two bytes of bitmap
	for i := range eps {
		eps[i] = fmt.Sprint("e", i)
	}
	seqs := map[string]uint64{}
	held := make([][4][24]uint8, len(eps)) // endpoint → prompt → block → tiers
	got, want := make([]float64, len(eps)), make([]float64, len(eps))
	for step := range 300 {
		n := r.IntN(len(eps))
		ep := eps[n]
		// Engines hash with seeds of their own: a move resolves only blocks
		// the endpoint stored (kvindex.EventIndex would also resolve another
		// endpoint's engine hash; the Redis index keeps mappings per endpoint).
		e := kvindextest.Engine{Seed: uint64(n), BlockTokens: 16}
		var evs []kvindex.Event
		for range 1 + r.IntN(4) {
			pi := r.IntN(len(prompts))
			p, h := prompts[pi], &held[n][pi]
			medium, bit := "GPU", uint8(1)
			if r.IntN(3) == 0 {
				medium, bit = "CPU", 2
			}
			switch op := r.IntN(20); {
			case op < 11:
				k := 1 + r.IntN(24)
				evs = append(evs, e.Stored(p, 0, k, medium))
				for i := range k {
					h[i] |= bit
				}
			case op < 13:
				// A move of blocks the endpoint holds (a move of others'
				// is resolved by kvindex.EventIndex's engine hashes of
				// every endpoint, and by none here).
				k := 0
				for k < 24 && h[k] != 0 {
					k++
				}
				if k > 0 {
					k = 1 + r.IntN(k)
					evs = append(evs, e.Moved(p, 0, k, medium))
					for i := range k {
						h[i] |= bit
					}
				}
			case op < 18:
				from := r.IntN(24)
				to := min(24, from+1+r.IntN(8))
				evs = append(evs, e.Removed(p, from, to, medium))
				for i := from; i < to; i++ {
					h[i] &^= bit
				}
			default:
				evs = append(evs, kvindex.Event{Kind: kvindex.AllBlocksCleared})
				held[n] = [4][24]uint8{}
			}
		}
		seqs[ep]++
		b := &kvindex.Batch{Model: "m", Seq: seqs[ep], Events: evs}
		x.Apply(ep, b)
		ref.Apply(ep, b)
		kvindextest.Sync(t, x)
		for _, p := range prompts {
			keys := ref.BlockKeys(nil, "m", "", p, 0)
			if err := x.MatchContext(context.Background(), keys, eps, got); err != nil {
				t.Fatal(err)
			}
			ref.Match(keys, eps, want)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d (%d events): matched %v, want %v", step, len(evs), got, want)
			}
		}
	}
	if st := x.BackendStats(); st.Errors != 0 || st.Dropped != 0 {
		t.Fatalf("backend stats %+v", st)
	}
	gotSt, _ := x.Stats()
	wantSt := ref.Stats()
	// (Removals differ: kvindex.EventIndex still knows the engine hashes of
	// blocks removed or cleared, the Redis index forgets them.)
	if gotSt.BlocksStored != wantSt.BlocksStored || gotSt.Unresolved != wantSt.Unresolved {
		t.Fatalf("stats %+v, want (as kvindex.EventIndex) %+v", gotSt, wantSt)
	}
}

// TestEventEntryLimit: stores past an endpoint's entry limit are refused
// and counted; removals make room again.
func TestEventEntryLimit(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.MaxEntries = 5
	x := newEvents(t, cfg, kvindex.EventIndexConfig{})
	e := kvindextest.Engine{Seed: 1, BlockTokens: 16}
	toks := kvindextest.Tokens(1, 16*8)
	keys := x.BlockKeys(nil, "m", "", toks, 0)
	x.Apply("a", kvindextest.Batch("m", e.Stored(toks, 0, 8, "GPU")))
	if st, _ := x.Stats(); st.Full != 3 || st.BlocksStored != 5 {
		t.Fatalf("stats %+v: want 5 stored, 3 refused", st)
	}
	if got := matchEvents(t, x, keys, "a"); got[0] != 5 {
		t.Fatalf("matched %v, want 5", got)
	}
	b := kvindextest.Batch("m", e.Removed(toks, 3, 5, "GPU"), e.Stored(toks, 3, 5, "CPU"))
	b.Seq = 1
	x.Apply("a", b)
	if st, _ := x.Stats(); st.Full != 3 {
		t.Fatalf("stats %+v: the freed entries were not reused", st)
	}
}

// TestEventRemovedBlocksForgotten: a block removed from both tiers is
// forgotten — a later move of it is unresolved, not a store — while one
// removed from one tier only stays mapped and can move back.
func TestEventRemovedBlocksForgotten(t *testing.T) {
	srv := redistest.Start(t)
	x := newEvents(t, testConfig(srv), kvindex.EventIndexConfig{})
	e := kvindextest.Engine{Seed: 1, BlockTokens: 16}
	toks := kvindextest.Tokens(1, 16*4)
	keys := x.BlockKeys(nil, "m", "", toks, 0)
	b := kvindextest.Batch("m",
		e.Stored(toks, 0, 4, "GPU"), e.Stored(toks, 0, 2, "CPU"), // blocks 0, 1 in both tiers
		e.Removed(toks, 0, 4, "GPU"), // 0, 1 stay on the CPU; 2, 3 are gone
		e.Moved(toks, 0, 4, "GPU"))   // 0, 1 move back; 2, 3 are unknown
	x.Apply("a", b)
	st, _ := x.Stats()
	if st.Unresolved != 2 || st.UnknownRemoves != 0 {
		t.Fatalf("stats %+v: want 2 unresolved moves", st)
	}
	if got := matchEvents(t, x, keys, "a"); got[0] != 2 {
		t.Fatalf("matched %v, want 2 blocks on the GPU", got)
	}
}

// TestEventIDsSwept: a cleared endpoint's id is dropped at once (its blocks
// are not found), its bits are swept, and the id is reused.
func TestEventIDsSwept(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.TTL = 400 * time.Millisecond // the sweep runs every 100ms
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	x := newEvents(t, cfg, kvindex.EventIndexConfig{})
	e := kvindextest.Engine{Seed: 1, BlockTokens: 16}
	toks := kvindextest.Tokens(1, 16*6)
	keys := x.BlockKeys(nil, "m", "", toks, 0)
	x.Apply("a", kvindextest.Batch("m", e.Stored(toks, 0, 6, "GPU")))
	x.Apply("b", kvindextest.Batch("m", e.Stored(toks, 0, 2, "CPU")))
	x.ClearEndpoint("a")
	if got := matchEvents(t, x, keys, "a", "b"); got[0] != 0 || got[1] == 0 {
		t.Fatalf("after clearing a: matched %v", got)
	}
	ctx := context.Background()
	eventually(t, "a's id not swept", func() bool {
		owners, err := c.HGetAll(ctx, cfg.KeyPrefix+"po").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, dropped := owners["0"]
		return !dropped
	})
	holders, err := c.HGetAll(ctx, cfg.KeyPrefix+"ph").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(holders) != 2 {
		t.Fatalf("%d blocks have holders, want b's 2", len(holders))
	}
	for k, bm := range holders {
		if bitOf(bm, 0) || bitOf(bm, 1) || !bitOf(bm, 3) {
			t.Fatalf("block %x: holders %x, want only b's CPU bit", k, bm)
		}
	}
	b := kvindextest.Batch("m", e.Stored(toks, 0, 3, "GPU"))
	b.Seq = 1
	x.Apply("c", b)
	if id, err := c.Get(ctx, cfg.KeyPrefix+"pi:c").Result(); err != nil || id != "0" {
		t.Fatalf("c's id %q %v, want the swept 0", id, err)
	}
	if got := matchEvents(t, x, keys, "a", "b", "c"); got[0] != 0 || got[2] != 3 {
		t.Fatalf("matched %v", got)
	}
}
