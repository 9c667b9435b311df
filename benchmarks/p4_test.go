package benchmarks

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/eppkit/eppkit/kvindex"
)

// p4Engine is one engine of the P4 scenarios: its KV events name blocks by
// hashes of its own (seeded) and carry the blocks' 16 token ids each.
type p4Engine struct{ seed uint64 }

func (e p4Engine) hash(block int) uint64 {
	x := e.seed<<32 | uint64(block+1)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// stored returns the BlockStored event of blocks [from, from+n) of toks.
func (e p4Engine) stored(toks []uint32, from, n int) kvindex.Event {
	ev := kvindex.Event{Kind: kvindex.BlockStored, TokenIDs: toks[16*from : 16*(from+n)], BlockSize: 16, Medium: kvindex.MediumGPU}
	for i := from; i < from+n; i++ {
		ev.BlockHashes = append(ev.BlockHashes, e.hash(i))
	}
	if from > 0 {
		ev.ParentHash, ev.HasParent = e.hash(from-1), true
	}
	return ev
}

func p4Tokens(seed uint64, n int) []uint32 {
	r := rand.New(rand.NewPCG(seed, 4))
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(r.IntN(128256))
	}
	return out
}

// p4Payload encodes ev as vLLM's array-format batch, with msgspec's compact
// integers.
func p4Payload(b *testing.B, ev kvindex.Event) []byte {
	var parent any
	if ev.HasParent {
		parent = ev.ParentHash
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode([]any{1712345678.25, []any{
		[]any{"BlockStored", ev.BlockHashes, parent, ev.TokenIDs, 16, nil, "GPU", nil},
	}, 0}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkP4Decode decodes msgpack payloads of vLLM array-format batches,
// each with one BlockStored of 16 blocks × 16 tokens.
func BenchmarkP4Decode(b *testing.B) {
	payloads := make([][]byte, 256)
	for i := range payloads {
		toks := p4Tokens(uint64(i), 16*16)
		payloads[i] = p4Payload(b, p4Engine{uint64(i)}.stored(toks, 0, 16))
	}
	var d kvindex.Decoder
	b.SetBytes(int64(len(payloads[0])))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := d.Decode("kv@10.0.0.1@m", uint64(i), payloads[i%len(payloads)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "block-events/s")
}

// BenchmarkP4Apply applies decoded batches of 16 block events to the event
// index for 64 endpoints at steady state: every engine evicts as much as it
// stores, the ops cycling through storing chains A, storing chains B,
// removing A, removing B (no duplicates: every event changes the index).
func BenchmarkP4Apply(b *testing.B) {
	const nEps, rounds = 64, 16
	eps := make([]string, nEps)
	for i := range eps {
		eps[i] = fmt.Sprintf("10.0.0.%d:8000", i)
	}
	var stores, removes [2][]*kvindex.Batch
	for set := range 2 {
		for e := range nEps {
			eng := p4Engine{uint64(set*nEps + e + 1)}
			toks := p4Tokens(eng.seed, 16*16*rounds)
			for r := range rounds {
				ev := eng.stored(toks, 16*r, 16)
				stores[set] = append(stores[set], &kvindex.Batch{Model: "m", Events: []kvindex.Event{ev}})
				removes[set] = append(removes[set], &kvindex.Batch{Model: "m", Events: []kvindex.Event{
					{Kind: kvindex.BlockRemoved, BlockHashes: ev.BlockHashes, Medium: kvindex.MediumGPU}}})
			}
		}
	}
	ops := append(append(append(stores[0], stores[1]...), removes[0]...), removes[1]...)
	x, err := kvindex.NewEventIndex(kvindex.EventIndexConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i % len(ops)
		x.Apply(eps[k/rounds%nEps], ops[k])
		i++
	}
	if st := x.Stats(); st.UnknownParents+st.UnknownRemoves+st.Malformed != 0 {
		b.Fatalf("events not applied: %+v", st)
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "block-events/s")
}

// BenchmarkP4Lookup looks up a 2,048-block prompt (its keys computed from
// its token ids before timing) against an index where N endpoints hold
// random-length prefixes of it.
func BenchmarkP4Lookup(b *testing.B) {
	for _, n := range []int{64} {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			const blocks = 2048
			x, err := kvindex.NewEventIndex(kvindex.EventIndexConfig{})
			if err != nil {
				b.Fatal(err)
			}
			toks := p4Tokens(42, 16*blocks)
			r := rand.New(rand.NewPCG(1, 2))
			eps := make([]string, n)
			for i := range eps {
				eps[i] = fmt.Sprintf("10.0.%d.%d:8000", i/256, i%256)
				x.Apply(eps[i], &kvindex.Batch{Model: "m", Events: []kvindex.Event{p4Engine{uint64(i % 4)}.stored(toks, 0, 1+r.IntN(blocks))}})
			}
			keys := x.BlockKeys(nil, "m", "", toks, blocks)
			matched := make([]float64, n)
			b.ReportAllocs()
			for b.Loop() {
				x.Match(keys, eps, matched)
			}
		})
	}
}
