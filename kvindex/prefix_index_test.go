package kvindex

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// chainOf returns the chained hashes of a string of one-letter blocks:
// chainOf("abc") is a 3-block chain sharing 2 blocks with chainOf("abd").
func chainOf(blocks string) []uint64 {
	var b strings.Builder
	for _, r := range blocks {
		b.WriteString(strings.Repeat(string(r), 4))
	}
	return HashPrompt(nil, "m", "", b.String(), 1, 1<<20)
}

func match(x *PrefixIndex, blocks string, endpoints ...string) []int {
	m := make([]int, len(endpoints))
	x.Match(chainOf(blocks), endpoints, m)
	return m
}

func wantMatch(t *testing.T, x *PrefixIndex, blocks string, endpoints []string, want ...int) {
	t.Helper()
	if got := match(x, blocks, endpoints...); !slices.Equal(got, want) {
		t.Errorf("Match(%q, %v) = %v, want %v", blocks, endpoints, got, want)
	}
	x.check(t)
}

func TestMatchCountsConsecutiveBlocks(t *testing.T) {
	x := NewPrefixIndex(PrefixIndexConfig{})
	x.Add("a", chainOf("pqrs"))
	x.Add("b", chainOf("pq"))
	x.Add("c", chainOf("pxy"))
	eps := []string{"a", "b", "c", "unknown"}
	wantMatch(t, x, "pqrs", eps, 4, 2, 1, 0)
	wantMatch(t, x, "pqrz", eps, 3, 2, 1, 0)
	wantMatch(t, x, "pxyz", eps, 1, 1, 3, 0)
	wantMatch(t, x, "zpqr", eps, 0, 0, 0, 0)
	wantMatch(t, x, "", eps, 0, 0, 0, 0)
	wantMatch(t, x, "pqrs", []string{"b", "a", "b", "x", "a"}, 2, 4, 2, 0, 4)
	if got := x.Len(); got != 4+2+3 {
		t.Errorf("Len = %d, want 9", got)
	}
}

func TestAddIgnoresBrokenChains(t *testing.T) {
	// "q" of chainOf("pq") added as if it were block 0: the index must not
	// credit it under "p", nor credit later blocks without earlier ones.
	x := NewPrefixIndex(PrefixIndexConfig{})
	pq := chainOf("pqr")
	x.Add("a", pq[1:]) // q, r as roots
	x.Add("b", pq)     // p, then q is known with another parent: stop
	eps := []string{"a", "b"}
	wantMatch(t, x, "pqr", eps, 0, 1)
	m := make([]int, 2)
	x.Match(pq[1:], eps, m)
	if !slices.Equal(m, []int{2, 0}) {
		t.Errorf("Match(q, r) = %v, want [2 0]", m)
	}
	x.Add("c", []uint64{7, 7, 7}) // a self-loop is not a chain
	if got := match(x, "", "c"); got[0] != 0 {
		t.Errorf("c matched %v", got)
	}
	m = make([]int, 1)
	x.Match([]uint64{7, 7}, []string{"c"}, m)
	if m[0] != 1 {
		t.Errorf("Match(7, 7) for c = %d, want 1", m[0])
	}
	x.check(t)
}

func TestEvictsTailsFirst(t *testing.T) {
	x := NewPrefixIndex(PrefixIndexConfig{DefaultCapacity: 6})
	x.Add("e", chainOf("abc"))
	x.Add("e", chainOf("xyz"))
	x.Add("e", chainOf("ab")) // refreshes a, b: c is now the oldest block
	x.Add("e", chainOf("k"))  // one over capacity
	eps := []string{"e"}
	wantMatch(t, x, "abc", eps, 2)
	wantMatch(t, x, "xyz", eps, 3)
	x.Add("e", chainOf("lm")) // two over: xyz is the oldest prefix, tail first
	wantMatch(t, x, "xyz", eps, 1)
	wantMatch(t, x, "abc", eps, 2)
	x.SetCapacity("e", 3) // keep the most recent 3: l, m, k
	wantMatch(t, x, "lm", eps, 2)
	wantMatch(t, x, "k", eps, 1)
	wantMatch(t, x, "ab", eps, 0)
	if x.Len() != 3 {
		t.Errorf("Len = %d, want 3", x.Len())
	}
}

func TestRefreshSharedPrefix(t *testing.T) {
	x := NewPrefixIndex(PrefixIndexConfig{DefaultCapacity: 5})
	x.Add("e", chainOf("pqr"))
	x.Add("e", chainOf("pqs")) // p, q refreshed; r is the oldest block
	x.Add("e", chainOf("z"))   // 5 blocks: p q r s z
	x.Add("e", chainOf("y"))   // evicts r
	eps := []string{"e"}
	wantMatch(t, x, "pqr", eps, 2)
	wantMatch(t, x, "pqs", eps, 3)
	x.Add("e", chainOf("w")) // evicts s: p, q are still older than z
	wantMatch(t, x, "pqs", eps, 2)
	wantMatch(t, x, "z", eps, 1)
	x.Add("e", chainOf("v")) // evicts q, then p, before z
	wantMatch(t, x, "pq", eps, 1)
	x.Add("e", chainOf("u"))
	wantMatch(t, x, "pq", eps, 0)
	wantMatch(t, x, "z", eps, 1)
}

func TestLongChainIsCutToCapacity(t *testing.T) {
	x := NewPrefixIndex(PrefixIndexConfig{DefaultCapacity: 3})
	x.Add("e", chainOf("abcdef"))
	wantMatch(t, x, "abcdef", []string{"e"}, 3)
	x.SetCapacity("e", 0) // back to the default
	x.Add("e", chainOf("abcdef"))
	wantMatch(t, x, "abcdef", []string{"e"}, 3)
}

func TestRemoveEndpoint(t *testing.T) {
	x := NewPrefixIndex(PrefixIndexConfig{})
	x.Add("a", chainOf("pqr"))
	x.Add("b", chainOf("pq"))
	x.RemoveEndpoint("a")
	x.RemoveEndpoint("nobody")
	eps := []string{"a", "b"}
	wantMatch(t, x, "pqr", eps, 0, 2)
	if x.Len() != 2 {
		t.Errorf("Len = %d, want 2", x.Len())
	}
	x.Add("c", chainOf("x")) // reuses a's id: no stale credit
	wantMatch(t, x, "pqr", []string{"a", "b", "c"}, 0, 2, 0)
	x.Add("a", chainOf("p"))
	wantMatch(t, x, "pqr", eps, 1, 2)
	if got := x.Endpoints(nil); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Endpoints = %q", got)
	}
	x.RemoveEndpoint("a")
	x.RemoveEndpoint("b")
	x.RemoveEndpoint("c")
	if got := x.Endpoints(nil); len(got) != 0 {
		t.Errorf("Endpoints = %q after removing all", got)
	}
	if x.Len() != 0 || x.blocks.count != 0 || len(x.heads) != 0 {
		t.Errorf("empty index holds %d entries, %d blocks, %d heads", x.Len(), x.blocks.count, len(x.heads))
	}
}

func TestManyEndpoints(t *testing.T) {
	x := NewPrefixIndex(PrefixIndexConfig{})
	var eps []string
	var want []int
	for i := range 300 {
		name := fmt.Sprintf("10.0.%d.%d:8000", i/256, i%256)
		eps = append(eps, name)
		n := 1 + i%40
		x.Add(name, chainOf(strings.Repeat("s", n)))
		want = append(want, n)
	}
	wantMatch(t, x, strings.Repeat("s", 50), eps, want...)
	for _, name := range eps[:150] {
		x.RemoveEndpoint(name)
	}
	for i := range want[:150] {
		want[i] = 0
	}
	wantMatch(t, x, strings.Repeat("s", 50), eps, want...)
}

func TestCapacityFromEngine(t *testing.T) {
	for _, c := range []struct{ block, gpu, index, want int }{
		{16, 31_250, 64, 7_812},
		{64, 1000, 64, 1000},
		{16, 4, 64, 1},
		{16, 1, 64, 1},
		{0, 100, 64, 0},
		{16, -1, 64, 0},
		{16, 100, 0, 0},
	} {
		if got := CapacityFromEngine(c.block, c.gpu, c.index); got != c.want {
			t.Errorf("CapacityFromEngine(%d, %d, %d) = %d, want %d", c.block, c.gpu, c.index, got, c.want)
		}
	}
}

func TestMatchAllocs(t *testing.T) {
	x := NewPrefixIndex(PrefixIndexConfig{})
	chain := chainOf(strings.Repeat("ab", 100))
	eps := make([]string, 64)
	for i := range eps {
		eps[i] = fmt.Sprint("e", i)
		x.Add(eps[i], chain[:i*3])
	}
	m := make([]int, len(eps))
	if n := testing.AllocsPerRun(100, func() { x.Match(chain, eps, m) }); n != 0 && !raceEnabled {
		t.Errorf("Match: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { x.Add("e7", chain[:50]) }); n != 0 {
		t.Errorf("Add (refresh): %v allocs, want 0", n)
	}
}

func TestConcurrentUse(t *testing.T) {
	x := NewPrefixIndex(PrefixIndexConfig{DefaultCapacity: 50})
	chains := make([][]uint64, 8)
	for i := range chains {
		chains[i] = chainOf(strings.Repeat("a", 10) + strings.Repeat(string(rune('b'+i)), 20))
	}
	eps := []string{"e0", "e1", "e2", "e3"}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			m := make([]int, len(eps))
			for i := range 300 {
				c := chains[(g+i)%len(chains)]
				switch i % 10 {
				case 0:
					x.RemoveEndpoint(eps[(g+i)%len(eps)])
				case 1:
					x.SetCapacity(eps[g], 10+i%40)
				case 2, 3:
					x.Add(eps[(g+i)%len(eps)], c)
				default:
					x.Match(c, eps, m)
					_ = x.Len()
				}
			}
		})
	}
	wg.Wait()
	x.check(t)
}

// naiveIndex is the model PrefixIndex must agree with: per endpoint, each
// held block remembers the last Add that covered it and its depth; eviction
// drops the oldest block, the deepest first among equals.
type naiveIndex struct {
	defaultCap int
	caps       map[string]int
	held       map[string]map[uint64]naiveEntry
	clock      int
}

type naiveEntry struct{ time, depth int }

func (n *naiveIndex) capacity(e string) int {
	if c, ok := n.caps[e]; ok {
		return c
	}
	return n.defaultCap
}

func (n *naiveIndex) add(e string, chain []uint64) {
	n.clock++
	if n.held[e] == nil {
		n.held[e] = map[uint64]naiveEntry{}
	}
	for d, h := range chain[:min(len(chain), n.capacity(e))] {
		n.held[e][h] = naiveEntry{n.clock, d}
	}
	n.evict(e)
}

func (n *naiveIndex) evict(e string) {
	for len(n.held[e]) > n.capacity(e) {
		var victim uint64
		best := naiveEntry{time: 1 << 62}
		for h, v := range n.held[e] {
			if v.time < best.time || v.time == best.time && v.depth > best.depth {
				victim, best = h, v
			}
		}
		delete(n.held[e], victim)
	}
}

func (n *naiveIndex) match(chain []uint64, e string) int {
	d := 0
	for d < len(chain) {
		if _, ok := n.held[e][chain[d]]; !ok {
			break
		}
		d++
	}
	return d
}

func TestPrefixIndexAgainstModel(t *testing.T) {
	for _, tc := range []struct {
		endpoints, maxCap, ops int
	}{{3, 6, 3000}, {6, 15, 3000}, {130, 30, 2000}} {
		t.Run(fmt.Sprint(tc.endpoints, "endpoints"), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.endpoints), 9))
			x := NewPrefixIndex(PrefixIndexConfig{DefaultCapacity: tc.maxCap / 2})
			n := &naiveIndex{defaultCap: tc.maxCap / 2, caps: map[string]int{}, held: map[string]map[uint64]naiveEntry{}}
			var eps []string
			for i := range tc.endpoints {
				eps = append(eps, fmt.Sprint("e", i))
			}
			randomChain := func() (string, []uint64) {
				b := make([]byte, 1+r.IntN(12))
				for i := range b {
					b[i] = "abc"[r.IntN(3)]
				}
				return string(b), chainOf(string(b))
			}
			for op := range tc.ops {
				e := eps[r.IntN(len(eps))]
				switch k := r.IntN(20); {
				case k == 0:
					x.RemoveEndpoint(e)
					delete(n.held, e)
					delete(n.caps, e)
				case k == 1:
					c := r.IntN(tc.maxCap+1) - 1
					x.SetCapacity(e, c)
					if c <= 0 {
						c = n.defaultCap
					}
					n.caps[e] = c
					n.evict(e)
				default:
					_, c := randomChain()
					x.Add(e, c)
					n.add(e, c)
				}
				name, c := randomChain()
				got := make([]int, len(eps))
				x.Match(c, eps, got)
				for i, e := range eps {
					if want := n.match(c, e); got[i] != want {
						t.Fatalf("op %d: Match(%q) for %s = %d, want %d", op, name, e, got[i], want)
					}
				}
				total := 0
				for _, h := range n.held {
					total += len(h)
				}
				if x.Len() != total {
					t.Fatalf("op %d: Len = %d, want %d", op, x.Len(), total)
				}
				if op%50 == 0 {
					x.check(t)
				}
			}
			x.check(t)
		})
	}
}

// check verifies the index's invariants.
func (x *PrefixIndex) check(t *testing.T) {
	t.Helper()
	x.mu.RLock()
	defer x.mu.RUnlock()
	refs := map[uint32]uint32{}
	entries, nodes := 0, 0
	for i, s := range x.blocks.slots {
		if s == 0 {
			continue
		}
		nodes++
		v := uint32(s)
		n := x.blocks.at(v)
		if home := x.blocks.home(n.lo); (home+int(s>>slotShift))%len(x.blocks.slots) != i {
			t.Fatalf("slot %d: displacement %d from home %d", i, s>>slotShift, home)
		}
		if n.set == 0 {
			t.Fatalf("node %d holds no endpoint", v)
		}
		refs[n.set]++
		for _, w := range x.sets.bits(n.set) {
			entries += bits.OnesCount64(w)
		}
		if p := n.parentNode(); p != 0 {
			for j, w := range x.sets.bits(n.set) {
				if w&^x.sets.bits(x.blocks.at(p).set)[j] != 0 {
					t.Fatalf("node %d has holders its parent %d lacks", v, p)
				}
			}
		}
	}
	if nodes != x.blocks.count {
		t.Fatalf("table counts %d nodes, holds %d", x.blocks.count, nodes)
	}
	for s, r := range x.sets.refs {
		if s != 0 && r != refs[uint32(s)] {
			t.Fatalf("set %d: %d refs, %d nodes", s, r, refs[uint32(s)])
		}
	}
	if entries != x.entries {
		t.Fatalf("entries = %d, nodes say %d", x.entries, entries)
	}
	heads, sizes := 0, 0
	for name, id := range x.ids {
		ep := &x.eps[id]
		if ep.name != name {
			t.Fatalf("endpoint %d is %q, want %q", id, ep.name, name)
		}
		size := 0
		prev := uint32(0)
		for s := ep.oldest; s != 0; prev, s = s, x.segs[s].newer {
			seg := x.segs[s]
			if seg.older != prev || seg.n == 0 {
				t.Fatalf("%s: segment %d is %+v (after %d)", name, s, seg, prev)
			}
			v := seg.tail
			for k := uint32(0); ; k++ {
				if !x.sets.has(x.blocks.at(v).set, id) {
					t.Fatalf("%s: segment %d owns node %d it does not hold", name, s, v)
				}
				if k == seg.n-1 {
					break
				}
				v = x.blocks.at(v).parentNode()
			}
			if x.heads[headKey(v, id)] != s {
				t.Fatalf("%s: segment %d: head %d says segment %d", name, s, v, x.heads[headKey(v, id)])
			}
			heads++
			size += int(seg.n)
		}
		if prev != ep.newest || size != ep.size || size > ep.capacity {
			t.Fatalf("%s: segments hold %d, size %d, capacity %d", name, size, ep.size, ep.capacity)
		}
		sizes += size
	}
	if heads != len(x.heads) || sizes != x.entries {
		t.Fatalf("%d segments, %d heads; %d blocks held, %d entries", heads, len(x.heads), sizes, x.entries)
	}
}

// BenchmarkIndexMatch looks up a 2,048-block chain against N endpoints that
// hold prefixes of it of different lengths (one set change per endpoint).
func BenchmarkIndexMatch(b *testing.B) {
	chain := HashPrompt(nil, "m", "", text(1, 2048*256), DefaultBlockTokens, DefaultMaxBlocks)
	for _, n := range []int{8, 64, 256} {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			x := NewPrefixIndex(PrefixIndexConfig{})
			eps := make([]string, n)
			for i := range eps {
				eps[i] = fmt.Sprintf("10.0.%d.%d:8000", i/256, i%256)
				x.Add(eps[i], chain[:len(chain)*(i+1)/n])
			}
			m := make([]int, n)
			b.ReportAllocs()
			for b.Loop() {
				x.Match(chain, eps, m)
			}
			if m[n-1] != len(chain) {
				b.Fatalf("matched %d, want %d", m[n-1], len(chain))
			}
		})
	}
}

// BenchmarkIndexAdd credits requests after the pick. W1: 28-block requests
// (24 blocks of one of 64 shared system prompts, 4 unique) spread over 64
// endpoints. 2048: distinct 2,048-block chains into one full endpoint, so
// each Add evicts as much as it inserts.
func BenchmarkIndexAdd(b *testing.B) {
	b.Run("W1", func(b *testing.B) {
		x := NewPrefixIndex(PrefixIndexConfig{})
		var system [64]string
		for i := range system {
			system[i] = text(uint64(i), 6000)
		}
		reqs := make([][]uint64, 4096)
		for k := range reqs {
			reqs[k] = HashPrompt(nil, "m", "", system[k%64]+text(uint64(1000+k), 1000), DefaultBlockTokens, DefaultMaxBlocks)
		}
		eps := make([]string, 64)
		for i := range eps {
			eps[i] = fmt.Sprintf("10.0.0.%d:8000", i)
		}
		b.ReportAllocs()
		k := 0
		for b.Loop() {
			x.Add(eps[k%61], reqs[k%len(reqs)])
			k++
		}
	})
	b.Run("2048", func(b *testing.B) {
		x := NewPrefixIndex(PrefixIndexConfig{DefaultCapacity: 20_000})
		chains := make([][]uint64, 64)
		for i := range chains {
			chains[i] = distinctChain(uint64(i), 2048)
		}
		b.ReportAllocs()
		k := 0
		for b.Loop() {
			x.Add("e", chains[k%len(chains)])
			k++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2048, "ns/block")
	})
}

// distinctChain returns n pseudo-random hashes, standing for a chain that
// shares nothing with any other.
func distinctChain(seed uint64, n int) []uint64 {
	r := rand.New(rand.NewPCG(seed, 42))
	c := make([]uint64, n)
	for i := range c {
		c[i] = r.Uint64()
	}
	return c
}

// BenchmarkIndexMemory is scenario P3: 1,000,000 (block, endpoint) entries
// over 64 endpoints as distinct chains of 2,048 blocks; reports the heap the
// index holds per entry.
func BenchmarkIndexMemory(b *testing.B) {
	const entries = 1_000_000
	eps := make([]string, 64)
	for i := range eps {
		eps[i] = fmt.Sprintf("10.0.0.%d:8000", i)
	}
	chain := make([]uint64, 2048)
	var perEntry float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := NewPrefixIndex(PrefixIndexConfig{})
		r := rand.New(rand.NewPCG(1, 2))
		for k, left := 0, entries; left > 0; k++ {
			c := chain[:min(left, len(chain))]
			for i := range c {
				c[i] = r.Uint64()
			}
			x.Add(eps[k%len(eps)], c)
			left -= len(c)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if x.Len() != entries {
			b.Fatalf("Len = %d", x.Len())
		}
		perEntry = float64(after.HeapInuse-before.HeapInuse) / entries
		runtime.KeepAlive(x)
	}
	b.ReportMetric(perEntry, "bytes/entry")
}

// Keys that differ only in bits the table does not key on directly (here the
// chain number in bits 32..39, the block number in the low bits) must neither
// collide nor pile up on one home slot.
func TestIndexStructuredKeys(t *testing.T) {
	x := NewPrefixIndex(PrefixIndexConfig{DefaultCapacity: 1 << 20})
	chain := make([]uint64, 512)
	const chains = 300
	for c := range chains {
		for i := range chain {
			chain[i] = uint64(c)<<32 | uint64(i)
		}
		x.Add("e", chain)
	}
	if got := x.Len(); got != chains*len(chain) {
		t.Fatalf("Len = %d, want %d distinct entries", got, chains*len(chain))
	}
	matched := make([]int, 1)
	x.Match(chain, []string{"e"}, matched)
	if matched[0] != len(chain) {
		t.Fatalf("matched %d", matched[0])
	}
}
