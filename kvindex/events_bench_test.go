package kvindex

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// p4Payloads returns n P4 messages: consecutive 16-block stores of one
// chain per seed.
func p4Payloads(b testing.TB, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = p4Payload(b, uint64(1+i/64), 16*(i%64))
	}
	return out
}

// BenchmarkP4Decode decodes P4 messages (vLLM array batches with one
// BlockStored of 16 blocks × 16 tokens).
func BenchmarkP4Decode(b *testing.B) {
	payloads := p4Payloads(b, 256)
	var d Decoder
	b.ReportAllocs()
	b.SetBytes(int64(len(payloads[0])))
	i := 0
	for b.Loop() {
		if _, err := d.Decode("kv@10.0.0.1@m", uint64(i), payloads[i%len(payloads)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "block-events/s")
}

// p4Stream is P4's apply workload for 64 endpoints at steady state: each
// endpoint's engine stores chains in 16-block batches and evicts as much as
// it stores. The ops cycle through four phases of 64×rounds batches: store
// set A, store set B, remove A, remove B, so every block event changes the
// index (no duplicates).
type p4Stream struct {
	ops []*Batch
	eps []string
}

func newP4Stream(b testing.TB, rounds int) *p4Stream {
	s := &p4Stream{eps: make([]string, 64)}
	for i := range s.eps {
		s.eps[i] = fmt.Sprintf("10.0.%d.%d:8000", i/256, i%256)
	}
	var d Decoder
	decoded := func(seed uint64, parent int) Event {
		bt, err := d.Decode("kv@x@m", 0, p4Payload(b, seed, parent))
		if err != nil {
			b.Fatal(err)
		}
		ev := bt.Events[0]
		ev.BlockHashes = append([]uint64(nil), ev.BlockHashes...)
		ev.TokenIDs = append([]uint32(nil), ev.TokenIDs...)
		return ev
	}
	var stores [2][]*Batch
	var removes [2][]*Batch
	for set := range 2 {
		for r := range rounds {
			for e := range 64 {
				ev := decoded(uint64(1+set*64+e), 16*r)
				stores[set] = append(stores[set], &Batch{Model: "m", Events: []Event{ev}})
				removes[set] = append(removes[set], &Batch{Model: "m", Events: []Event{{Kind: BlockRemoved, BlockHashes: ev.BlockHashes, Medium: MediumGPU}}})
			}
		}
	}
	s.ops = append(append(append(stores[0], stores[1]...), removes[0]...), removes[1]...)
	return s
}

func (s *p4Stream) endpoint(i int) string { return s.eps[i%64] }

// BenchmarkP4Apply applies decoded P4 batches (16 block events each) to an
// event index for 64 endpoints; see p4Stream.
func BenchmarkP4Apply(b *testing.B) {
	s := newP4Stream(b, 16)
	x := newIndex(b, EventIndexConfig{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i % len(s.ops)
		x.Apply(s.endpoint(k), s.ops[k])
		i++
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "block-events/s")
}

// BenchmarkP4DecodeApply decodes and applies P4Apply's stream, encoded as
// vLLM array batches: the subscriber's work per message, the figure of
// BENCHMARKS.md's goal of 2M block-events/s per core.
func BenchmarkP4DecodeApply(b *testing.B) {
	s := newP4Stream(b, 16)
	payloads := make([][]byte, len(s.ops))
	for i, op := range s.ops {
		ev := op.Events[0]
		if ev.Kind == BlockRemoved {
			payloads[i] = pack(b, []any{1.5, []any{[]any{"BlockRemoved", ev.BlockHashes, "GPU"}}, 0})
			continue
		}
		var parent any
		if ev.HasParent {
			parent = ev.ParentHash
		}
		payloads[i] = pack(b, []any{1.5, []any{[]any{"BlockStored", ev.BlockHashes, parent, ev.TokenIDs, 16, nil, "GPU", nil}}, 0})
	}
	x := newIndex(b, EventIndexConfig{})
	var d Decoder
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i % len(payloads)
		bt, err := d.Decode("kv@10.0.0.1@m", uint64(i), payloads[k])
		if err != nil {
			b.Fatal(err)
		}
		x.Apply(s.endpoint(k), bt)
		i++
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "block-events/s")
}

// BenchmarkP4Lookup looks a 2,048-block prompt's keys up in an index where
// N endpoints hold random-length prefixes of it.
func BenchmarkP4Lookup(b *testing.B) {
	for _, n := range []int{64} {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			x, keys, eps := lookupFixture(b, n, 2048)
			matched := make([]float64, len(eps))
			b.ReportAllocs()
			for b.Loop() {
				x.Match(keys, eps, matched)
			}
		})
	}
}

// BenchmarkP4LookupTokens is BenchmarkP4Lookup from the prompt's token ids:
// key hashing included.
func BenchmarkP4LookupTokens(b *testing.B) {
	x, _, eps := lookupFixture(b, 64, 2048)
	toks := tokens(42, 16*2048)
	matched := make([]float64, len(eps))
	var keys []uint64
	b.ReportAllocs()
	for b.Loop() {
		keys = x.BlockKeys(keys[:0], "m", "", toks, 0)
		x.Match(keys, eps, matched)
	}
}

// BenchmarkP4IndexMemory stores 1,000,000 (block, endpoint) entries over 64
// endpoints as distinct chains of 2,048 blocks (no block shared, each
// endpoint with its own hash seed: the worst case) through 16-block
// BlockStored events, and reports the heap held per entry (HeapInuse delta
// after a forced GC / entries).
func BenchmarkP4IndexMemory(b *testing.B) {
	const entries, chainLen = 1_000_000, 2048
	eps := make([]string, 64)
	for i := range eps {
		eps[i] = fmt.Sprintf("10.0.0.%d:8000", i)
	}
	toks := make([]uint32, 16*chainLen)
	hashes := make([]uint64, chainLen)
	b.ReportAllocs()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		x := newIndex(b, EventIndexConfig{})
		for c, added := 0, 0; added < entries; c++ {
			n := min(chainLen, entries-added)
			for i := range toks[:16*n] {
				toks[i] = uint32(mix(uint64(c)<<32|uint64(i)) % 128256)
			}
			for i := range hashes[:n] {
				hashes[i] = mix(uint64(c)<<32 | uint64(i) | 1<<62)
			}
			for i := 0; i < n; i += 16 {
				ev := Event{Kind: BlockStored, BlockHashes: hashes[i : i+16], TokenIDs: toks[16*i : 16*(i+16)], BlockSize: 16, Medium: MediumGPU}
				if i > 0 {
					ev.ParentHash, ev.HasParent = hashes[i-1], true
				}
				x.Apply(eps[c%64], &Batch{Model: "m", Events: []Event{ev}})
			}
			added += n
		}
		elapsed := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if x.Len() != entries {
			b.Fatalf("index holds %d entries, want %d", x.Len(), entries)
		}
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/entries, "bytes/entry")
		b.ReportMetric(float64(entries)/elapsed.Seconds(), "block-events/s")
		runtime.KeepAlive(x)
	}
}
