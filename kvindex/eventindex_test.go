package kvindex

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// check verifies the index's invariants: entry counts, set references,
// table counts, and that every endpoint mapping points at a block the
// endpoint holds.
func (x *EventIndex) check(t testing.TB) {
	t.Helper()
	x.mu.RLock()
	defer x.mu.RUnlock()
	live, dead, entries := 0, 0, 0
	perEp := make([]int, len(x.eps))
	refs := make([]uint32, len(x.sets.refs))
	for i := range x.keys.nodes {
		n := &x.keys.nodes[i]
		switch {
		case n.live():
			live++
			if n.set == 0 || n.set == deadSet {
				t.Fatalf("live node %d with set %d", i, n.set)
			}
			if x.keys.find(n.key()) != i {
				t.Fatalf("node %d (key %#x) not found at its position", i, n.key())
			}
			refs[n.set]++
			for id := range x.eps {
				if x.sets.has(n.set, uint32(2*id)) || x.sets.has(n.set, uint32(2*id+1)) {
					entries++
					perEp[id]++
				}
			}
		case n.set == deadSet:
			dead++
		case n.set != 0:
			t.Fatalf("empty node %d with set %d", i, n.set)
		}
	}
	if live != x.keys.live || dead != x.keys.dead || entries != x.entries {
		t.Fatalf("counted %d live, %d dead, %d entries; index says %d, %d, %d", live, dead, entries, x.keys.live, x.keys.dead, x.entries)
	}
	for s := 1; s < len(refs); s++ {
		if refs[s] != x.sets.refs[s] {
			t.Fatalf("set %d: %d nodes refer to it, refs %d", s, refs[s], x.sets.refs[s])
		}
	}
	for id, ep := range x.eps {
		if ep.name == "" {
			continue
		}
		if ep.size != perEp[id] {
			t.Fatalf("endpoint %s: size %d, holds %d", ep.name, ep.size, perEp[id])
		}
		for hm, p := range ep.extra {
			n := &x.keys.nodes[p]
			if !n.live() || !(x.sets.has(n.set, uint32(2*id)) || x.sets.has(n.set, uint32(2*id+1))) {
				t.Fatalf("endpoint %s: mapping %#x → %d, a block it does not hold", ep.name, hm, p)
			}
		}
	}
	hl, hd := 0, 0
	for _, s := range x.hashes.slots {
		switch s {
		case 0:
		case hashDead:
			hd++
		default:
			hl++
			if p := slotPos(s); p < 0 || p >= len(x.keys.nodes) {
				t.Fatalf("hash slot points at %d of %d", p, len(x.keys.nodes))
			}
		}
	}
	if hl != x.hashes.live || hd != x.hashes.dead {
		t.Fatalf("hash table: counted %d live, %d dead; says %d, %d", hl, hd, x.hashes.live, x.hashes.dead)
	}
}

// engine simulates one engine's prefix cache and the KV events it would
// publish: vLLM-like hashes from a per-engine seed.
type engine struct {
	seed uint64
	bt   int
}

// hashes returns the engine hashes of the full blocks of toks.
func (e engine) hashes(toks []uint32) []uint64 {
	out := make([]uint64, 0, len(toks)/e.bt)
	h := e.seed
	for i := 0; i+e.bt <= len(toks); i += e.bt {
		for _, t := range toks[i : i+e.bt] {
			h = mix(h ^ uint64(t))
		}
		out = append(out, h)
	}
	return out
}

// stored returns a BlockStored for blocks [from, to) of toks.
func (e engine) stored(toks []uint32, from, to int, medium string) Event {
	hs := e.hashes(toks)
	ev := Event{Kind: BlockStored, BlockHashes: hs[from:to], TokenIDs: toks[from*e.bt : to*e.bt], BlockSize: e.bt, Medium: medium}
	if from > 0 {
		ev.ParentHash, ev.HasParent = hs[from-1], true
	}
	return ev
}

func (e engine) removed(toks []uint32, from, to int, medium string) Event {
	return Event{Kind: BlockRemoved, BlockHashes: e.hashes(toks)[from:to], Medium: medium}
}

func batch(model string, evs ...Event) *Batch { return &Batch{Model: model, Events: evs} }

func tokens(seed uint64, n int) []uint32 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(r.IntN(128000))
	}
	return out
}

func newIndex(t testing.TB, cfg EventIndexConfig) *EventIndex {
	t.Helper()
	x, err := NewEventIndex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func matchOf(x *EventIndex, keys []uint64, eps ...string) []float64 {
	m := make([]float64, len(eps))
	x.Match(keys, eps, m)
	return m
}

func wantMatched(t *testing.T, got []float64, want ...float64) {
	t.Helper()
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("matched %v, want %v", got, want)
		}
	}
}

func TestEventIndexStoreRemoveMatch(t *testing.T) {
	x := newIndex(t, EventIndexConfig{})
	e := engine{seed: 1, bt: 16}
	toks := tokens(1, 64+5) // 4 full blocks and a partial one
	x.Apply("a", batch("m", e.stored(toks, 0, 2, "GPU")))
	x.Apply("a", batch("m", e.stored(toks, 2, 4, "GPU"))) // chained through the parent hash
	x.Apply("b", batch("m", e.stored(toks, 0, 2, "GPU")))
	keys := x.BlockKeys(nil, "m", "", toks, 0)
	if len(keys) != 4 {
		t.Fatalf("%d keys, want 4 (full blocks only)", len(keys))
	}
	wantMatched(t, matchOf(x, keys, "a", "b", "c"), 4, 2, 0)
	if x.Len() != 6 {
		t.Fatalf("Len %d, want 6", x.Len())
	}
	// Another model's request never matches: the model roots the chain.
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "other", "", toks, 0), "a"), 0)

	// Removing block 1 from a cuts its run to block 0.
	x.Apply("a", batch("m", e.removed(toks, 1, 2, "GPU")))
	wantMatched(t, matchOf(x, keys, "a", "b"), 1, 2)
	// Duplicates change nothing.
	for range 2 {
		x.Apply("a", batch("m", e.removed(toks, 1, 2, "GPU")))
		x.Apply("b", batch("m", e.stored(toks, 0, 2, "GPU")))
	}
	wantMatched(t, matchOf(x, keys, "a", "b"), 1, 2)
	if x.Len() != 5 {
		t.Fatalf("Len %d, want 5", x.Len())
	}
	// AllBlocksCleared wipes a only.
	x.Apply("a", batch("m", Event{Kind: AllBlocksCleared}))
	wantMatched(t, matchOf(x, keys, "a", "b"), 0, 2)
	x.check(t)
	st := x.Stats()
	if st.Clears != 1 || st.BlocksStored != 10 || st.BlocksRemoved != 3 || st.UnknownRemoves != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestEventIndexTiers(t *testing.T) {
	x := newIndex(t, EventIndexConfig{})
	e := engine{seed: 1, bt: 16}
	toks := tokens(2, 64)
	x.Apply("a", batch("m", e.stored(toks, 0, 4, "GPU")))
	// Offloaded to CPU (a tier move: no tokens), then evicted from the GPU.
	move := e.stored(toks, 2, 4, "CPU")
	move.TokenIDs, move.HasParent = nil, false
	x.Apply("a", batch("m", move, e.removed(toks, 2, 4, "GPU")))
	keys := x.BlockKeys(nil, "m", "", toks, 0)
	wantMatched(t, matchOf(x, keys, "a"), 2+2*0.8)
	if x.Len() != 4 {
		t.Fatalf("Len %d, want 4: a tier is not an entry", x.Len())
	}
	// Custom weights.
	y := newIndex(t, EventIndexConfig{GPUWeight: 1, CPUWeight: 0.5})
	y.Apply("a", batch("m", e.stored(toks, 0, 4, "GPU"), move, e.removed(toks, 2, 4, "GPU")))
	wantMatched(t, matchOf(y, keys, "a"), 3)
	// Gone from CPU too: the run ends at block 2.
	x.Apply("a", batch("m", e.removed(toks, 3, 4, "CPU_PINNED")))
	wantMatched(t, matchOf(x, keys, "a"), 2.8)
	x.check(t)
}

func TestEventIndexEnginesWithDifferentSeeds(t *testing.T) {
	// Engines without a shared PYTHONHASHSEED name the same blocks
	// differently; the index keys blocks by content and resolves each
	// engine's own hashes.
	x := newIndex(t, EventIndexConfig{})
	e1, e2 := engine{seed: 1, bt: 16}, engine{seed: 2, bt: 16}
	toks := tokens(3, 96)
	x.Apply("a", batch("m", e1.stored(toks, 0, 3, "GPU"), e1.stored(toks, 3, 6, "GPU")))
	x.Apply("b", batch("m", e2.stored(toks, 0, 3, "GPU"), e2.stored(toks, 3, 6, "GPU")))
	x.Apply("c", batch("m", e1.stored(toks, 0, 2, "GPU"))) // shares e1's seed
	keys := x.BlockKeys(nil, "m", "", toks, 0)
	wantMatched(t, matchOf(x, keys, "a", "b", "c"), 6, 6, 2)
	x.Apply("b", batch("m", e2.removed(toks, 4, 5, "GPU")))
	x.Apply("a", batch("m", e1.removed(toks, 0, 1, "GPU")))
	wantMatched(t, matchOf(x, keys, "a", "b", "c"), 0, 4, 2)
	x.check(t)
	if st := x.Stats(); st.UnknownRemoves != 0 || st.Conflicts != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Removing endpoint b forgets its mappings and blocks.
	x.RemoveEndpoint("b")
	wantMatched(t, matchOf(x, keys, "a", "b", "c"), 0, 0, 2)
	x.check(t)
}

func TestEventIndexModelsAreSeparate(t *testing.T) {
	// The same engine hashes under two models (engines do not hash the
	// model) must not mix.
	x := newIndex(t, EventIndexConfig{})
	e := engine{seed: 1, bt: 16}
	toks := tokens(4, 32)
	x.Apply("a", batch("m1", e.stored(toks, 0, 2, "GPU")))
	x.Apply("b", batch("m2", e.stored(toks, 0, 2, "GPU")))
	x.Apply("a", batch("m2", e.removed(toks, 0, 2, "GPU"))) // a holds no m2 blocks
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "m1", "", toks, 0), "a", "b"), 2, 0)
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "m2", "", toks, 0), "a", "b"), 0, 2)
	if st := x.Stats(); st.Conflicts != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestEventIndexLoRASaltAndMultimodal(t *testing.T) {
	x := newIndex(t, EventIndexConfig{})
	e := engine{seed: 1, bt: 16}
	toks := tokens(5, 48)
	lora := e.stored(toks, 0, 3, "GPU")
	lora.LoRAName, lora.HasLoRAName = "sql-lora", true
	lora.ExtraKeys = pack(t, []any{[]any{"sql-lora", "tenant"}, []any{"sql-lora"}, []any{"sql-lora"}})
	x.Apply("a", batch("base", lora))
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "sql-lora", "tenant", toks, 0), "a"), 3)
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "sql-lora", "", toks, 0), "a"), 0)
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "base", "tenant", toks, 0), "a"), 0)

	// A multimodal block (and everything after it) never matches a
	// text-only request, but the text blocks before it do.
	e2 := engine{seed: 9, bt: 16}
	mm := e2.stored(toks, 0, 3, "GPU")
	mm.ExtraKeys = pack(t, []any{nil, []any{[]any{"img-hash", 3}}, nil})
	x.Apply("b", batch("base", mm))
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "base", "", toks, 0), "b"), 1)
	// Its removal resolves all the same.
	x.Apply("b", batch("base", e2.removed(toks, 0, 3, "GPU")))
	if st := x.Stats(); st.UnknownRemoves != 0 {
		t.Fatalf("stats %+v", st)
	}
	// SGLang's salt comes in its metadata.
	sg := engine{seed: 3, bt: 16}.stored(toks, 0, 2, "GPU")
	sg.CacheSalt = "tenant"
	x.Apply("c", batch("base", sg))
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "base", "tenant", toks, 0), "c"), 2)
	x.check(t)
}

func TestEventIndexBadEventsAreCounted(t *testing.T) {
	x := newIndex(t, EventIndexConfig{})
	e := engine{seed: 1, bt: 16}
	toks := tokens(6, 64)
	good := e.stored(toks, 0, 2, "GPU")
	x.Apply("a", batch("m", good))
	before := x.Len()

	orphan := e.stored(toks, 3, 4, "GPU") // parent (block 2) never stored
	odd := e.stored(toks, 0, 2, "GPU")
	odd.TokenIDs = odd.TokenIDs[:31] // not blocks × block size
	wrongSize := engine{seed: 1, bt: 32}.stored(toks, 0, 2, "GPU")
	move := e.stored(toks, 2, 4, "CPU")
	move.TokenIDs, move.HasParent = nil, false // tier move of unknown blocks
	group := e.stored(toks, 2, 3, "GPU")
	group.GroupIdx, group.HasGroup = 1, true
	badExtra := e.stored(toks, 0, 2, "GPU")
	badExtra.ExtraKeys = pack(t, []any{nil}) // one entry for two blocks
	x.Apply("a", batch("m", orphan, odd, wrongSize, move, group, badExtra, e.removed(toks, 3, 4, "GPU")))
	if x.Len() != before {
		t.Fatalf("Len %d after bad events, want %d", x.Len(), before)
	}
	st := x.Stats()
	if st.UnknownParents != 1 || st.Malformed != 2 || st.BlockSizeMisses != 1 || st.Unresolved != 2 ||
		st.SkippedGroups != 1 || st.UnknownRemoves != 1 {
		t.Fatalf("stats %+v", st)
	}
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "m", "", toks, 0), "a"), 2)
	x.check(t)
}

func TestEventIndexConflictingHashes(t *testing.T) {
	// A broken engine reuses a hash for other content: the index keeps both
	// blocks apart and counts the conflict.
	x := newIndex(t, EventIndexConfig{})
	e := engine{seed: 1, bt: 16}
	t1, t2 := tokens(7, 16), tokens(8, 16)
	x.Apply("a", batch("m", e.stored(t1, 0, 1, "GPU")))
	bad := e.stored(t2, 0, 1, "GPU")
	bad.BlockHashes = e.hashes(t1)
	x.Apply("b", batch("m", bad))
	if x.Stats().Conflicts != 1 {
		t.Fatalf("stats %+v", x.Stats())
	}
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "m", "", t1, 0), "a", "b"), 1, 0)
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "m", "", t2, 0), "a", "b"), 0, 1)
	x.Apply("b", batch("m", e.removed(t1, 0, 1, "GPU"))) // b's own mapping
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "m", "", t1, 0), "a", "b"), 1, 0)
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "m", "", t2, 0), "a", "b"), 0, 0)
	x.check(t)
}

func TestEventIndexSHA256CBOR(t *testing.T) {
	x := newIndex(t, EventIndexConfig{Algorithm: HashSHA256CBOR, HashSeed: "0"})
	h := NewVLLMHasher("0")
	toks := tokens(9, 64)
	hs := h.AppendHashes(nil, toks, 16, "", "", 0)
	x.Apply("a", batch("m", Event{Kind: BlockStored, BlockHashes: hs, TokenIDs: toks, BlockSize: 16, Medium: "GPU"}))
	keys := x.BlockKeys(nil, "m", "", toks, 0)
	if !slices.Equal(keys, hs) {
		t.Fatalf("request keys %x, want the engine's %x", keys, hs)
	}
	wantMatched(t, matchOf(x, keys, "a"), 4)
	x.Apply("a", batch("m", Event{Kind: BlockRemoved, BlockHashes: hs[2:3], Medium: "GPU"}))
	wantMatched(t, matchOf(x, keys, "a"), 2)
	// A model the index has not seen in a topic is a LoRA adapter.
	lora := h.AppendHashes(nil, toks, 16, "sql-lora", "", 0)
	if got := x.BlockKeys(nil, "sql-lora", "", toks, 0); !slices.Equal(got, lora) {
		t.Fatalf("LoRA keys %x, want %x", got, lora)
	}
	x.check(t)
	if _, err := NewEventIndex(EventIndexConfig{Algorithm: "md5"}); err == nil {
		t.Fatal("unknown algorithm accepted")
	}
}

// naiveEvents is the reference model of the precise index: per endpoint, the
// tiers it holds each content key in, and its engine hash → key map.
type naiveEvents struct {
	held   map[string]map[uint64]uint8 // endpoint → key → tier bits
	byHash map[string]map[uint64]uint64
}

func (n *naiveEvents) apply(ep string, e engine, seedKey uint64, toks []uint32, ev Event) {
	if n.held[ep] == nil {
		n.held[ep], n.byHash[ep] = map[uint64]uint8{}, map[uint64]uint64{}
	}
	bit := uint8(1) << TierOf(ev.Medium)
	switch ev.Kind {
	case BlockStored:
		var c ChainHasher
		c.Reset("m", "", 16, 0)
		c.WriteTokens(toks)
		keys := c.AppendSum(nil)
		for i, h := range e.hashes(toks) {
			n.byHash[ep][h] = keys[i]
		}
		for _, h := range ev.BlockHashes {
			n.held[ep][n.byHash[ep][h]] |= bit
		}
	case BlockRemoved:
		for _, h := range ev.BlockHashes {
			k, ok := n.byHash[ep][h]
			if !ok {
				continue
			}
			if n.held[ep][k] &^= bit; n.held[ep][k] == 0 {
				delete(n.held[ep], k)
			}
		}
	case AllBlocksCleared:
		clear(n.held[ep])
	}
}

func (n *naiveEvents) match(keys []uint64, ep string) float64 {
	m := 0.0
	for _, k := range keys {
		b := n.held[ep][k]
		switch {
		case b&1 != 0:
			m++
		case b&2 != 0:
			m += 0.8
		default:
			return m
		}
	}
	return m
}

func TestEventIndexAgainstModel(t *testing.T) {
	// Random stores, tier moves, removals and clears over a few shared
	// prompts, 8 endpoints with 3 hash seeds; after every batch the index
	// agrees with the naive model and keeps its invariants.
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { testAgainstModel(t, seed) })
	}
}

func testAgainstModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(11, seed))
	eps := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	engines := map[string]engine{}
	for i, ep := range eps {
		engines[ep] = engine{seed: uint64(i % 3), bt: 16}
	}
	prompts := make([][]uint32, 6)
	for i := range prompts {
		prompts[i] = tokens(uint64(100+i), 16*(20+r.IntN(60)))
		if i%2 == 1 { // shared prefixes
			copy(prompts[i], prompts[i-1][:min(len(prompts[i-1]), 16*10)])
		}
	}
	x := newIndex(t, EventIndexConfig{})
	ref := &naiveEvents{held: map[string]map[uint64]uint8{}, byHash: map[string]map[uint64]uint64{}}
	for step := range 3000 {
		ep := eps[r.IntN(len(eps))]
		e := engines[ep]
		p := prompts[r.IntN(len(prompts))]
		nb := len(p) / 16
		var ev Event
		switch op := r.IntN(20); {
		case op < 9: // store a run from its parent
			from := r.IntN(nb)
			if from > 0 && ref.held[ep] != nil && r.IntN(2) == 0 {
				from = 0
			}
			to := from + 1 + r.IntN(nb-from)
			if from > 0 && !ref.knows(ep, e, p, from-1) {
				from = 0
			}
			ev = e.stored(p, from, to, []string{"GPU", "GPU", "CPU"}[r.IntN(3)])
		case op < 11: // tier move of known blocks
			from := r.IntN(nb)
			to := from + 1 + r.IntN(nb-from)
			ev = e.stored(p, from, to, "CPU")
			ev.TokenIDs, ev.HasParent = nil, false
			for i := from; i < to; i++ {
				if !ref.knows(ep, e, p, i) {
					ev.BlockHashes = ev.BlockHashes[:i-from]
					break
				}
			}
		case op < 19:
			from := r.IntN(nb)
			ev = e.removed(p, from, from+1+r.IntN(min(8, nb-from)), []string{"GPU", "CPU"}[r.IntN(2)])
		default:
			ev = Event{Kind: AllBlocksCleared}
		}
		x.Apply(ep, batch("m", ev))
		ref.apply(ep, e, 0, p, ev)
		if step%50 == 0 || step == 2999 {
			x.check(t)
		}
		q := prompts[r.IntN(len(prompts))]
		keys := x.BlockKeys(nil, "m", "", q, 0)
		got := matchOf(x, keys, eps...)
		for i, ep := range eps {
			if want := ref.match(keys, ep); math.Abs(got[i]-want) > 1e-9 {
				t.Fatalf("step %d: %s matched %v, want %v", step, ep, got[i], want)
			}
		}
	}
	if x.Len() == 0 {
		t.Fatal("the model test ended with an empty index")
	}
}

// knows reports whether the model has seen block i of p at ep (so its hash
// resolves as a parent or a tier move).
func (n *naiveEvents) knows(ep string, e engine, p []uint32, i int) bool {
	k, ok := n.byHash[ep][e.hashes(p)[i]]
	if !ok {
		return false
	}
	_, held := n.held[ep][k]
	return held
}

func TestEventIndexGrowsAndShrinks(t *testing.T) {
	x := newIndex(t, EventIndexConfig{})
	var prompts [][]uint32
	for i := range 40 {
		p := tokens(uint64(1000+i), 16*100)
		prompts = append(prompts, p)
		e := engine{seed: uint64(i % 2), bt: 16}
		x.Apply(fmt.Sprint("ep", i%4), batch("m", e.stored(p, 0, 100, "GPU")))
	}
	if x.Len() != 4000 {
		t.Fatalf("Len %d", x.Len())
	}
	x.check(t)
	for i := range 4 {
		x.ClearEndpoint(fmt.Sprint("ep", i))
	}
	x.check(t)
	if x.Len() != 0 || len(x.keys.nodes) > 256 {
		t.Fatalf("after clearing: Len %d, %d node slots", x.Len(), len(x.keys.nodes))
	}
	// Stores after a rebuild still resolve their parents.
	e := engine{seed: 0, bt: 16}
	x.Apply("ep0", batch("m", e.stored(prompts[0], 0, 50, "GPU")))
	x.Apply("ep0", batch("m", e.stored(prompts[0], 50, 100, "GPU")))
	wantMatched(t, matchOf(x, x.BlockKeys(nil, "m", "", prompts[0], 0), "ep0"), 100)
	x.check(t)
}

func TestEventIndexMatchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	x, keys, eps := lookupFixture(t, 64, 256)
	matched := make([]float64, len(eps))
	x.Match(keys, eps, matched)
	if n := testing.AllocsPerRun(100, func() { x.Match(keys, eps, matched) }); n != 0 {
		t.Fatalf("Match: %v allocations", n)
	}
	var dst []uint64
	toks := tokens(1, 16*256)
	dst = x.BlockKeys(dst[:0], "m", "", toks, 0)
	if n := testing.AllocsPerRun(100, func() { dst = x.BlockKeys(dst[:0], "m", "", toks, 0) }); n != 0 {
		t.Fatalf("BlockKeys: %v allocations", n)
	}
}

func TestEventIndexConcurrentUse(t *testing.T) {
	x := newIndex(t, EventIndexConfig{})
	toks := tokens(1, 16*64)
	keys := x.BlockKeys(nil, "m", "", toks, 0)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			e := engine{seed: uint64(w), bt: 16}
			ep := fmt.Sprint("ep", w)
			for i := range 200 {
				x.Apply(ep, batch("m", e.stored(toks, 0, 1+i%64, "GPU")))
				if i%10 == 0 {
					x.Apply(ep, batch("m", e.removed(toks, 0, 64, "GPU")))
				}
			}
		})
		wg.Go(func() {
			m := make([]float64, 4)
			for range 200 {
				x.Match(keys, []string{"ep0", "ep1", "ep2", "ep3"}, m)
				x.Len()
			}
		})
	}
	wg.Wait()
	x.check(t)
}

// lookupFixture is P4's lookup scenario: an index where n endpoints hold
// random-length prefixes of one prompt of blocks blocks, and that prompt's
// keys.
func lookupFixture(t testing.TB, n, blocks int) (*EventIndex, []uint64, []string) {
	x := newIndex(t, EventIndexConfig{})
	toks := tokens(42, 16*blocks)
	r := rand.New(rand.NewPCG(1, 2))
	eps := make([]string, n)
	for i := range eps {
		eps[i] = fmt.Sprintf("10.0.%d.%d:8000", i/256, i%256)
		e := engine{seed: uint64(i % 4), bt: 16}
		x.Apply(eps[i], batch("m", e.stored(toks, 0, 1+r.IntN(blocks), "GPU")))
	}
	return x, x.BlockKeys(nil, "m", "", toks, 0), eps
}

// An endpoint that names one block by two engine hashes (its shared mapping
// and its own) must not keep its own mapping once a removal through the
// shared one made it leave the block.
func TestEventIndexRemoveViaSharedDropsExtra(t *testing.T) {
	x, _ := NewEventIndex(EventIndexConfig{})
	toks := make([]uint32, 16)
	for i := range toks {
		toks[i] = uint32(i)
	}
	st := func(h uint64) *Batch {
		return &Batch{Model: "m", Events: []Event{{Kind: BlockStored, BlockHashes: []uint64{h}, TokenIDs: toks, BlockSize: 16}}}
	}
	rm := func(h uint64) *Batch {
		return &Batch{Model: "m", Events: []Event{{Kind: BlockRemoved, BlockHashes: []uint64{h}}}}
	}
	// a names the block 1 (the shared mapping), then 2 (its own).
	x.Apply("a", st(1))
	x.Apply("a", st(2))
	x.check(t)
	x.Apply("a", rm(1))
	x.check(t)

	// b names it 3 (its own: 1 is shared), then 1; leaving through 1 drops 3.
	x.Apply("a", st(1))
	x.Apply("b", st(3))
	x.Apply("b", st(1))
	x.check(t)
	x.Apply("b", rm(1))
	x.check(t)
	// And through its own mapping: 4 and 5 both name the block for c.
	x.Apply("c", st(4))
	x.Apply("c", st(5))
	x.Apply("c", rm(4))
	x.check(t)
	if n := x.Len(); n != 1 {
		t.Fatalf("%d entries, want 1 (a's)", n)
	}
}
