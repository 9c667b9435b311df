package kvindextest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex"
)

// Flusher is implemented by stores that write in the background, or whose
// reads may lag their writes: Flush returns once every earlier write is
// done and visible to the store's reads.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Sync waits for s's background writes when it is a Flusher (for at most
// ten seconds, failing the test past that); other stores write at once.
func Sync(tb testing.TB, s any) {
	tb.Helper()
	f, ok := s.(Flusher)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Flush(ctx); err != nil {
		tb.Fatalf("flush: %v", err)
	}
}

// Tokens returns n deterministic token ids for seed.
func Tokens(seed uint64, n int) []uint32 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(r.IntN(128000))
	}
	return out
}

// Chain returns the chained block hashes of a deterministic prompt of n
// 64-token blocks for model "m": chains of different seeds share no block.
func Chain(seed uint64, n int) []uint64 {
	var h kvindex.ChainHasher
	h.Reset("m", "", kvindex.DefaultBlockTokens, n)
	h.WriteTokens(Tokens(seed, n*kvindex.DefaultBlockTokens))
	return h.AppendSum(nil)
}

// Engine simulates one engine's prefix cache hashing: block hashes chained
// from a per-engine seed (engines with different seeds name the same blocks
// differently, as vLLM engines with different PYTHONHASHSEEDs do).
type Engine struct {
	Seed        uint64
	BlockTokens int
}

// Hashes returns the engine's hashes of the full blocks of toks.
func (e Engine) Hashes(toks []uint32) []uint64 {
	out := make([]uint64, 0, len(toks)/e.BlockTokens)
	h := e.Seed
	for i := 0; i+e.BlockTokens <= len(toks); i += e.BlockTokens {
		for _, t := range toks[i : i+e.BlockTokens] {
			h = mix(h ^ uint64(t))
		}
		out = append(out, h)
	}
	return out
}

// Stored returns the BlockStored event of blocks [from, to) of toks in
// medium, chained to block from-1 by its parent hash.
func (e Engine) Stored(toks []uint32, from, to int, medium string) kvindex.Event {
	hs := e.Hashes(toks)
	ev := kvindex.Event{Kind: kvindex.BlockStored, BlockHashes: hs[from:to], TokenIDs: toks[from*e.BlockTokens : to*e.BlockTokens],
		BlockSize: e.BlockTokens, Medium: medium}
	if from > 0 {
		ev.ParentHash, ev.HasParent = hs[from-1], true
	}
	return ev
}

// Moved returns the token-less BlockStored event that moves blocks
// [from, to) of toks to medium (an offload).
func (e Engine) Moved(toks []uint32, from, to int, medium string) kvindex.Event {
	return kvindex.Event{Kind: kvindex.BlockStored, BlockHashes: e.Hashes(toks)[from:to], Medium: medium}
}

// Removed returns the BlockRemoved event of blocks [from, to) of toks in
// medium.
func (e Engine) Removed(toks []uint32, from, to int, medium string) kvindex.Event {
	return kvindex.Event{Kind: kvindex.BlockRemoved, BlockHashes: e.Hashes(toks)[from:to], Medium: medium}
}

// Batch returns a batch of model's events.
func Batch(model string, evs ...kvindex.Event) *kvindex.Batch {
	return &kvindex.Batch{Model: model, Events: evs}
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// PrefixFactory returns a new, empty store of default capacity
// cfg.DefaultCapacity, closed when the test ends.
type PrefixFactory func(t *testing.T, cfg kvindex.PrefixIndexConfig) kvindex.PrefixStore

// TestPrefixStore checks that stores from newStore behave as
// kvindex.PrefixIndex does: consecutive runs from block 0, capacities,
// eviction of the least recently credited prefixes tails first, removal,
// concurrent use, and a long random run compared with a PrefixIndex.
func TestPrefixStore(t *testing.T, newStore PrefixFactory) {
	t.Run("Empty", func(t *testing.T) {
		s := newStore(t, kvindex.PrefixIndexConfig{})
		wantPrefix(t, s, Chain(1, 4), []string{"a", "b"}, 0, 0)
		wantPrefix(t, s, nil, []string{"a"}, 0)
		wantPrefix(t, s, Chain(1, 4), nil)
	})
	t.Run("ConsecutiveFromBlockZero", func(t *testing.T) {
		s := newStore(t, kvindex.PrefixIndexConfig{})
		a := Chain(1, 10)
		s.Add("a", a)
		s.Add("b", a[:3])
		Sync(t, s)
		eps := []string{"a", "b", "c", "a"}
		wantPrefix(t, s, a, eps, 10, 3, 0, 10)
		wantPrefix(t, s, a[:4], eps, 4, 3, 0, 4)
		// A chain that leaves a's after block 5 matches its first 6 blocks.
		fork := slices.Concat(a[:6], Chain(2, 4))
		wantPrefix(t, s, fork, eps, 6, 3, 0, 6)
		wantPrefix(t, s, Chain(3, 5), eps, 0, 0, 0, 0)
	})
	t.Run("Capacity", func(t *testing.T) {
		s := newStore(t, kvindex.PrefixIndexConfig{DefaultCapacity: 100})
		a := Chain(1, 10)
		s.SetCapacity("a", 5)
		s.Add("a", a)
		s.Add("b", a)
		Sync(t, s)
		wantPrefix(t, s, a, []string{"a", "b"}, 5, 10)
	})
	t.Run("EvictsLeastRecentTailsFirst", func(t *testing.T) {
		s := newStore(t, kvindex.PrefixIndexConfig{DefaultCapacity: 8})
		a, b, c := Chain(1, 4), Chain(2, 4), Chain(3, 2)
		s.Add("e", a)
		s.Add("e", b) // full
		s.Add("e", a[:2])
		s.Add("e", c) // evicts a's tail, credited longest ago
		Sync(t, s)
		for _, tc := range []struct {
			chain []uint64
			want  int
		}{{a, 2}, {b, 4}, {c, 2}} {
			wantPrefix(t, s, tc.chain, []string{"e"}, tc.want)
		}
		s.Add("e", Chain(4, 3)) // then b's tail
		Sync(t, s)
		wantPrefix(t, s, b, []string{"e"}, 1)
		wantPrefix(t, s, a, []string{"e"}, 2)
	})
	t.Run("ShrinkAndRestore", func(t *testing.T) {
		s := newStore(t, kvindex.PrefixIndexConfig{DefaultCapacity: 8})
		a := Chain(1, 10)
		s.Add("a", a)
		s.SetCapacity("a", 3)
		Sync(t, s)
		wantPrefix(t, s, a, []string{"a"}, 3)
		s.SetCapacity("a", 0) // back to the default: nothing comes back
		Sync(t, s)
		wantPrefix(t, s, a, []string{"a"}, 3)
		s.Add("a", a)
		Sync(t, s)
		wantPrefix(t, s, a, []string{"a"}, 8)
	})
	t.Run("EndpointsAreSeparate", func(t *testing.T) {
		s := newStore(t, kvindex.PrefixIndexConfig{DefaultCapacity: 6})
		a := Chain(1, 6)
		s.Add("a", a)
		for i := range 5 {
			s.Add("b", Chain(uint64(10+i), 6))
		}
		Sync(t, s)
		wantPrefix(t, s, a, []string{"a", "b"}, 6, 0)
	})
	t.Run("RemoveEndpoint", func(t *testing.T) {
		s := newStore(t, kvindex.PrefixIndexConfig{})
		a := Chain(1, 5)
		s.Add("a", a)
		s.Add("b", a)
		s.SetCapacity("a", 2)
		s.RemoveEndpoint("a")
		Sync(t, s)
		wantPrefix(t, s, a, []string{"a", "b"}, 0, 5)
		s.Add("a", a) // back, empty, with the default capacity
		Sync(t, s)
		wantPrefix(t, s, a, []string{"a", "b"}, 5, 5)
		s.RemoveEndpoint("nobody")
	})
	t.Run("ConcurrentUse", func(t *testing.T) {
		s := newStore(t, kvindex.PrefixIndexConfig{DefaultCapacity: 64})
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				ep := fmt.Sprint("e", g%2)
				matched := make([]int, 2)
				for i := range 25 {
					c := Chain(uint64(i%5), 8)
					s.Add(ep, c)
					if err := s.MatchContext(context.Background(), c, []string{"e0", "e1"}, matched); err != nil {
						t.Error(err)
						return
					}
					for _, m := range matched {
						if m < 0 || m > len(c) {
							t.Errorf("matched %v of %d blocks", matched, len(c))
							return
						}
					}
				}
			})
		}
		wg.Wait()
		Sync(t, s)
		wantPrefix(t, s, Chain(4, 8), []string{"e0", "e1"}, 8, 8)
	})
	t.Run("AgainstPrefixIndex", func(t *testing.T) {
		for seed := range uint64(3) {
			t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { prefixAgainstMemory(t, newStore, seed) })
		}
	})
}

// prefixAgainstMemory runs random Adds, capacity changes and removals on a
// store and a PrefixIndex and compares their matches, now and then (a store
// that writes in the background gets several updates at once).
func prefixAgainstMemory(t *testing.T, newStore PrefixFactory, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 3))
	cfg := kvindex.PrefixIndexConfig{DefaultCapacity: 40}
	s, ref := newStore(t, cfg), kvindex.NewPrefixIndex(cfg)
	eps := []string{"a", "b", "c"}
	// Prompts branch off each other, so chains share prefixes.
	chains := [][]uint64{Chain(seed*100, 30)}
	for i := 1; i < 8; i++ {
		base := chains[r.IntN(len(chains))]
		cut := r.IntN(len(base))
		chains = append(chains, slices.Concat(base[:cut], Chain(seed*100+uint64(i), 1+r.IntN(25))))
	}
	got, want := make([]int, len(eps)), make([]int, len(eps))
	for step := range 600 {
		ep := eps[r.IntN(len(eps))]
		switch op := r.IntN(20); {
		case op < 16:
			c := chains[r.IntN(len(chains))]
			c = c[:1+r.IntN(len(c))]
			s.Add(ep, c)
			ref.Add(ep, c)
		case op < 19:
			n := r.IntN(50)
			s.SetCapacity(ep, n)
			ref.SetCapacity(ep, n)
		default:
			s.RemoveEndpoint(ep)
			ref.RemoveEndpoint(ep)
		}
		if r.IntN(4) != 0 && step < 599 {
			continue // let a background writer batch several updates
		}
		Sync(t, s)
		for _, c := range chains {
			if err := s.MatchContext(context.Background(), c, eps, got); err != nil {
				t.Fatal(err)
			}
			ref.Match(c, eps, want)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: matched %v, want %v (as kvindex.PrefixIndex)", step, got, want)
			}
		}
	}
}

// wantPrefix checks the matches of chain on endpoints.
func wantPrefix(t *testing.T, s kvindex.PrefixStore, chain []uint64, endpoints []string, want ...int) {
	t.Helper()
	got := make([]int, len(endpoints))
	for i := range got {
		got[i] = -7 // must be overwritten
	}
	if err := s.MatchContext(context.Background(), chain, endpoints, got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("matched %v, want %v", got, want)
	}
}

// EventFactory returns a new, empty store for cfg, closed when the test
// ends.
type EventFactory func(t *testing.T, cfg kvindex.EventIndexConfig) kvindex.EventStore

// TestEventStore checks that stores from newStore behave as
// kvindex.EventIndex does: chained stores, removals, tiers, clears,
// idempotent duplicates, bad events ignored, LoRA and exact keys, and a long
// random run compared with an EventIndex.
func TestEventStore(t *testing.T, newStore EventFactory) {
	e := Engine{Seed: 1, BlockTokens: 16}
	t.Run("StoreRemoveMatch", func(t *testing.T) {
		s := newStore(t, kvindex.EventIndexConfig{})
		toks := Tokens(1, 64+5) // 4 full blocks and a partial one
		s.Apply("a", Batch("m", e.Stored(toks, 0, 2, "GPU")))
		s.Apply("a", Batch("m", e.Stored(toks, 2, 4, "GPU"))) // chained by the parent hash
		s.Apply("b", Batch("m", e.Stored(toks, 0, 2, "GPU")))
		keys := s.BlockKeys(nil, "m", "", toks, 0)
		if len(keys) != 4 {
			t.Fatalf("%d keys, want 4 (full blocks only)", len(keys))
		}
		if s.BlockTokens() != 16 {
			t.Fatalf("BlockTokens %d", s.BlockTokens())
		}
		wantEvents(t, s, keys, []string{"a", "b", "c", "a"}, 4, 2, 0, 4)
		wantEvents(t, s, s.BlockKeys(nil, "other", "", toks, 0), []string{"a"}, 0)
		s.Apply("a", Batch("m", e.Removed(toks, 1, 2, "GPU")))
		wantEvents(t, s, keys, []string{"a", "b"}, 1, 2)
		for range 2 { // duplicates change nothing
			s.Apply("a", Batch("m", e.Removed(toks, 1, 2, "GPU")))
			s.Apply("b", Batch("m", e.Stored(toks, 0, 2, "GPU")))
		}
		wantEvents(t, s, keys, []string{"a", "b"}, 1, 2)
		s.Apply("a", Batch("m", kvindex.Event{Kind: kvindex.AllBlocksCleared}))
		wantEvents(t, s, keys, []string{"a", "b"}, 0, 2)
	})
	t.Run("Tiers", func(t *testing.T) {
		s := newStore(t, kvindex.EventIndexConfig{})
		toks := Tokens(2, 64)
		keys := s.BlockKeys(nil, "m", "", toks, 0)
		s.Apply("a", Batch("m", e.Stored(toks, 0, 4, "GPU")))
		s.Apply("a", Batch("m", e.Moved(toks, 0, 4, "CPU"), e.Removed(toks, 2, 4, "GPU")))
		wantEvents(t, s, keys, []string{"a"}, 2+2*0.8)
		s.Apply("a", Batch("m", e.Removed(toks, 1, 2, "CPU"))) // still on the GPU
		wantEvents(t, s, keys, []string{"a"}, 2+2*0.8)
		s.Apply("a", Batch("m", e.Removed(toks, 0, 1, "GPU")))
		wantEvents(t, s, keys, []string{"a"}, 0.8+1+2*0.8)
		// Weights come from the configuration.
		w := newStore(t, kvindex.EventIndexConfig{GPUWeight: 1, CPUWeight: 0.5})
		w.Apply("a", Batch("m", e.Stored(toks, 0, 4, "CPU_PINNED")))
		wantEvents(t, w, keys, []string{"a"}, 2)
	})
	t.Run("ClearAndRemoveEndpoint", func(t *testing.T) {
		s := newStore(t, kvindex.EventIndexConfig{})
		toks := Tokens(3, 64)
		keys := s.BlockKeys(nil, "m", "", toks, 0)
		for _, ep := range []string{"a", "b", "c"} {
			s.Apply(ep, Batch("m", e.Stored(toks, 0, 4, "GPU")))
		}
		s.ClearEndpoint("a")
		s.RemoveEndpoint("b")
		s.RemoveEndpoint("nobody")
		wantEvents(t, s, keys, []string{"a", "b", "c"}, 0, 0, 4)
		s.Apply("a", Batch("m", e.Stored(toks, 0, 3, "GPU")))
		s.Apply("b", Batch("m", e.Stored(toks, 0, 1, "GPU")))
		wantEvents(t, s, keys, []string{"a", "b", "c"}, 3, 1, 4)
	})
	t.Run("BadEventsChangeNothing", func(t *testing.T) {
		s := newStore(t, kvindex.EventIndexConfig{})
		toks := Tokens(4, 64)
		keys := s.BlockKeys(nil, "m", "", toks, 0)
		wrongSize := Engine{Seed: 1, BlockTokens: 32}.Stored(toks, 0, 2, "GPU")
		orphan := e.Stored(Tokens(5, 64), 2, 4, "GPU") // parent never stored
		short := e.Stored(toks, 0, 4, "GPU")
		short.TokenIDs = short.TokenIDs[:60]
		unknown := e.Removed(Tokens(6, 64), 0, 2, "GPU")
		group := e.Stored(toks, 0, 4, "GPU")
		group.GroupIdx, group.HasGroup = 1, true
		s.Apply("a", Batch("m", wrongSize, orphan, short, unknown, group))
		wantEvents(t, s, keys, []string{"a"}, 0)
		s.Apply("a", Batch("m", e.Stored(toks, 0, 4, "GPU"), unknown))
		wantEvents(t, s, keys, []string{"a"}, 4)
		s.Apply("a", &kvindex.Batch{})
		s.Apply("a", Batch("m", kvindex.Event{Kind: kvindex.BlockStored}))
		wantEvents(t, s, keys, []string{"a"}, 4)
	})
	t.Run("LoRAAndSalt", func(t *testing.T) {
		s := newStore(t, kvindex.EventIndexConfig{})
		toks := Tokens(7, 64)
		ev := e.Stored(toks, 0, 4, "GPU")
		ev.LoRAName, ev.HasLoRAName = "sql-lora", true
		salted := Engine{Seed: 9, BlockTokens: 16}.Stored(toks, 0, 4, "GPU")
		salted.CacheSalt = "tenant-1"
		s.Apply("a", Batch("m", ev))
		s.Apply("b", Batch("m", salted))
		wantEvents(t, s, s.BlockKeys(nil, "sql-lora", "", toks, 0), []string{"a", "b"}, 4, 0)
		wantEvents(t, s, s.BlockKeys(nil, "m", "", toks, 0), []string{"a", "b"}, 0, 0)
		wantEvents(t, s, s.BlockKeys(nil, "m", "tenant-1", toks, 0), []string{"a", "b"}, 0, 4)
	})
	t.Run("ExactKeys", func(t *testing.T) {
		s := newStore(t, kvindex.EventIndexConfig{Algorithm: kvindex.HashSHA256CBOR, HashSeed: "0"})
		h := kvindex.NewVLLMHasher("0")
		toks := Tokens(9, 64)
		hs := h.AppendHashes(nil, toks, 16, "", "", 0)
		s.Apply("a", Batch("m", kvindex.Event{Kind: kvindex.BlockStored, BlockHashes: hs, TokenIDs: toks, BlockSize: 16, Medium: "GPU"}))
		keys := s.BlockKeys(nil, "m", "", toks, 0)
		if !slices.Equal(keys, hs) {
			t.Fatalf("request keys %x, want the engine's %x", keys, hs)
		}
		wantEvents(t, s, keys, []string{"a"}, 4)
		s.Apply("a", Batch("m", kvindex.Event{Kind: kvindex.BlockRemoved, BlockHashes: hs[2:3], Medium: "GPU"}))
		wantEvents(t, s, keys, []string{"a"}, 2)
		lora := h.AppendHashes(nil, toks, 16, "sql-lora", "", 0)
		if got := s.BlockKeys(nil, "sql-lora", "", toks, 0); !slices.Equal(got, lora) {
			t.Fatalf("LoRA keys %x, want %x", got, lora)
		}
	})
	t.Run("ConcurrentUse", func(t *testing.T) {
		s := newStore(t, kvindex.EventIndexConfig{})
		toks := Tokens(10, 16*32)
		keys := s.BlockKeys(nil, "m", "", toks, 0)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				ep := fmt.Sprint("e", g)
				matched := make([]float64, 4)
				for i := range 16 {
					s.Apply(ep, Batch("m", e.Stored(toks, 2*i, 2*i+2, "GPU")))
					if err := s.MatchContext(context.Background(), keys, []string{"e0", "e1", "e2", "e3"}, matched); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		wantEvents(t, s, keys, []string{"e0", "e1", "e2", "e3"}, 32, 32, 32, 32)
	})
	t.Run("AgainstEventIndex", func(t *testing.T) {
		for seed := range uint64(3) {
			t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { eventsAgainstMemory(t, newStore, seed) })
		}
	})
}

// eventsAgainstMemory runs a random stream of engine events — stores from
// held parents, offloads of held blocks, removals, clears — through a store
// and an EventIndex and compares their matches.
func eventsAgainstMemory(t *testing.T, newStore EventFactory, seed uint64) {
	r := rand.New(rand.NewPCG(11, seed))
	eps := []string{"a", "b", "c", "d"}
	engines := map[string]Engine{}
	for i, ep := range eps {
		engines[ep] = Engine{Seed: uint64(i % 3), BlockTokens: 16}
	}
	prompts := make([][]uint32, 5)
	for i := range prompts {
		prompts[i] = Tokens(seed*10+uint64(i), 16*(10+r.IntN(30)))
		if i%2 == 1 { // shared prefixes
			copy(prompts[i], prompts[i-1][:min(len(prompts[i-1]), 16*6)])
		}
	}
	s := newStore(t, kvindex.EventIndexConfig{})
	ref, err := kvindex.NewEventIndex(kvindex.EventIndexConfig{})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]map[uint64]uint8{} // endpoint → engine hash → tier bits
	for _, ep := range eps {
		held[ep] = map[uint64]uint8{}
	}
	got, want := make([]float64, len(eps)), make([]float64, len(eps))
	for step := range 400 {
		ep := eps[r.IntN(len(eps))]
		e, h := engines[ep], held[ep]
		p := prompts[r.IntN(len(prompts))]
		hs := e.Hashes(p)
		lead := 0 // blocks of p the engine holds from block 0
		for lead < len(hs) && h[hs[lead]] != 0 {
			lead++
		}
		var ev kvindex.Event
		switch op := r.IntN(20); {
		case op < 9 && lead < len(hs): // store a run after what is held
			to := lead + 1 + r.IntN(len(hs)-lead)
			ev = e.Stored(p, lead, to, "GPU")
			for _, x := range hs[lead:to] {
				h[x] |= 1
			}
		case op < 11 && lead > 0: // offload held blocks
			from := r.IntN(lead)
			ev = e.Moved(p, from, lead, "CPU")
			for _, x := range hs[from:lead] {
				h[x] |= 2
			}
		case op < 19:
			from := r.IntN(len(hs))
			to := min(len(hs), from+1+r.IntN(6))
			medium, bit := "GPU", uint8(1)
			if r.IntN(3) == 0 {
				medium, bit = "CPU", 2
			}
			ev = e.Removed(p, from, to, medium)
			for _, x := range hs[from:to] {
				if h[x] &^= bit; h[x] == 0 {
					delete(h, x)
				}
			}
		default:
			ev = kvindex.Event{Kind: kvindex.AllBlocksCleared}
			clear(h)
		}
		b := &kvindex.Batch{Model: "m", Seq: uint64(step), Events: []kvindex.Event{ev}}
		s.Apply(ep, b)
		ref.Apply(ep, b)
		q := prompts[r.IntN(len(prompts))]
		keys := ref.BlockKeys(nil, "m", "", q, 0)
		if k := s.BlockKeys(nil, "m", "", q, 0); !slices.Equal(k, keys) {
			t.Fatalf("step %d: keys differ from kvindex.EventIndex's", step)
		}
		Sync(t, s)
		if err := s.MatchContext(context.Background(), keys, eps, got); err != nil {
			t.Fatal(err)
		}
		ref.Match(keys, eps, want)
		for i := range eps {
			if math.Abs(got[i]-want[i]) > 1e-9 {
				t.Fatalf("step %d: matched %v, want %v (as kvindex.EventIndex)", step, got, want)
			}
		}
	}
	if ref.Len() == 0 {
		t.Fatal("the run ended with an empty index")
	}
}

// wantEvents checks the tier-weighted matches of keys on endpoints.
func wantEvents(t *testing.T, s kvindex.EventStore, keys []uint64, endpoints []string, want ...float64) {
	t.Helper()
	Sync(t, s)
	got := make([]float64, len(endpoints))
	if err := s.MatchContext(context.Background(), keys, endpoints, got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("matched %v, want %v", got, want)
		}
	}
}
