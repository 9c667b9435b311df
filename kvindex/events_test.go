package kvindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// pack encodes v as msgspec does: the smallest integer encodings, float64
// doubles, map keys in the given order (use mapOf for ordered maps).
func pack(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ordered is a msgpack map with its keys in order.
type ordered [][2]any

func (m ordered) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(len(m)); err != nil {
		return err
	}
	for _, kv := range m {
		if err := enc.Encode(kv[0]); err != nil {
			return err
		}
		if err := enc.Encode(kv[1]); err != nil {
			return err
		}
	}
	return nil
}

func seqTokens(start, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = uint32(start + i)
	}
	return out
}

func decodeOK(t *testing.T, payload []byte) *Batch {
	t.Helper()
	var d Decoder
	b, err := d.Decode("kv@10.0.0.1:8000@llama", 7, payload)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return b
}

func TestDecodeVLLMArrayBatch(t *testing.T) {
	// [ts, [BlockStored, BlockRemoved, AllBlocksCleared], dp rank]: vLLM's
	// array_like layout with every BlockStored field.
	payload := pack(t, []any{1712.5, []any{
		[]any{"BlockStored", []any{uint64(11), uint64(12)}, nil, seqTokens(0, 32), 16, nil, "GPU", nil, nil, 0, "full_attention", nil},
		[]any{"BlockRemoved", []any{uint64(11)}, "CPU"},
		[]any{"AllBlocksCleared"},
	}, 3})
	b := decodeOK(t, payload)
	if b.Timestamp != 1712.5 || !b.HasRank || b.DataParallelRank != 3 || b.Seq != 7 || len(b.Events) != 3 {
		t.Fatalf("batch %+v", b)
	}
	if b.Endpoint != "10.0.0.1:8000" || b.Model != "llama" {
		t.Fatalf("topic parts %q %q", b.Endpoint, b.Model)
	}
	s := b.Events[0]
	if s.Kind != BlockStored || !slices.Equal(s.BlockHashes, []uint64{11, 12}) || s.HasParent || len(s.TokenIDs) != 32 ||
		s.TokenIDs[31] != 31 || s.BlockSize != 16 || s.HasLoRAID || s.Medium != "GPU" || s.HasLoRAName ||
		s.ExtraKeys != nil || !s.HasGroup || s.GroupIdx != 0 || s.SpecKind != "full_attention" || s.HasSlidingWindow {
		t.Fatalf("stored %+v", s)
	}
	r := b.Events[1]
	if r.Kind != BlockRemoved || !slices.Equal(r.BlockHashes, []uint64{11}) || r.Medium != "CPU" {
		t.Fatalf("removed %+v", r)
	}
	if b.Events[2].Kind != AllBlocksCleared {
		t.Fatalf("cleared %+v", b.Events[2])
	}
}

func TestDecodeOldTwoElementBatch(t *testing.T) {
	// Old engines: [ts, events], BlockStored without medium (→ GPU) and
	// BlockRemoved with only hashes.
	payload := pack(t, []any{int64(5), []any{
		[]any{"BlockStored", []any{uint64(1)}, uint64(99), seqTokens(0, 16), 16, 4},
		[]any{"BlockRemoved", []any{uint64(1)}},
	}})
	b := decodeOK(t, payload)
	if b.Timestamp != 5 || b.HasRank || len(b.Events) != 2 {
		t.Fatalf("batch %+v", b)
	}
	s := b.Events[0]
	if !s.HasParent || s.ParentHash != 99 || !s.HasLoRAID || s.LoRAID != 4 || s.Medium != MediumGPU {
		t.Fatalf("stored %+v", s)
	}
	if b.Events[1].Medium != MediumGPU {
		t.Fatalf("removed medium %q", b.Events[1].Medium)
	}
}

func TestDecodeMapBatch(t *testing.T) {
	// Newest engines: a map batch of tagged maps; unknown keys are skipped.
	extra := []any{[]any{"sql-lora", "salt-1"}, nil}
	payload := pack(t, ordered{
		{"ts", 3.25},
		{"events", []any{
			ordered{
				{"type", "BlockStored"},
				{"block_hashes", []any{uint64(1), uint64(2)}},
				{"parent_block_hash", nil},
				{"token_ids", seqTokens(100, 32)},
				{"block_size", 16},
				{"lora_id", 7},
				{"medium", nil},
				{"lora_name", "sql-lora"},
				{"extra_keys", extra},
				{"group_idx", nil},
				{"kv_cache_spec_kind", nil},
				{"kv_cache_spec_sliding_window", 4096},
				{"a_future_field", ordered{{"nested", []any{1, 2, 3}}}},
			},
			ordered{{"block_hashes", []any{uint64(2)}}, {"type", "BlockRemoved"}, {"medium", "GPU"}, {"group_idx", 1}},
			ordered{{"type", "AllBlocksCleared"}},
		}},
		{"data_parallel_rank", nil},
		{"future", "x"},
	})
	b := decodeOK(t, payload)
	if b.Timestamp != 3.25 || b.HasRank || len(b.Events) != 3 {
		t.Fatalf("batch %+v", b)
	}
	s := b.Events[0]
	if s.Kind != BlockStored || s.LoRAID != 7 || s.LoRAName != "sql-lora" || !s.HasLoRAName || s.Medium != MediumGPU ||
		s.HasGroup || s.SlidingWindow != 4096 || !s.HasSlidingWindow || s.TokenIDs[0] != 100 {
		t.Fatalf("stored %+v", s)
	}
	if want := pack(t, extra); !bytes.Equal(s.ExtraKeys, want) {
		t.Fatalf("extra keys %x, want %x", s.ExtraKeys, want)
	}
	if r := b.Events[1]; r.Kind != BlockRemoved || !r.HasGroup || r.GroupIdx != 1 || !slices.Equal(r.BlockHashes, []uint64{2}) {
		t.Fatalf("removed %+v", r)
	}
}

func TestDecodeHashEncodings(t *testing.T) {
	digest := make([]byte, 32)
	for i := range digest {
		digest[i] = byte(i)
	}
	short := []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	payload := pack(t, []any{0.0, []any{
		[]any{"BlockRemoved", []any{
			uint64(math.MaxUint64), // ≥ 2⁶³: msgpack uint64
			uint64(1 << 63),
			int64(-1), // negative int64: its bit pattern
			int64(-2),
			int8(-3), // negative fixint
			uint8(200),
			digest, // raw digest: last 8 bytes big-endian
			short,  // xxhash_cbor's 16-byte digest
		}},
		[]any{"BlockStored", []any{}, digest, []any{}, 16},
	}})
	b := decodeOK(t, payload)
	want := []uint64{math.MaxUint64, 1 << 63, math.MaxUint64, math.MaxUint64 - 1, math.MaxUint64 - 2, 200,
		binary.BigEndian.Uint64(digest[24:]), binary.BigEndian.Uint64(short[8:])}
	if got := b.Events[0].BlockHashes; !slices.Equal(got, want) {
		t.Fatalf("hashes %d, want %d", got, want)
	}
	if p := b.Events[1]; !p.HasParent || p.ParentHash != binary.BigEndian.Uint64(digest[24:]) {
		t.Fatalf("parent %+v", p)
	}
}

func TestDecodeSGLang(t *testing.T) {
	payload := pack(t, []any{1.0, []any{
		// SGLang's 7-element BlockStored: [tag, hashes, parent, tokens, size, lora_id, medium].
		[]any{"BlockStored", []any{int64(-5)}, nil, seqTokens(0, 16), 16, nil, "CPU_PINNED"},
		// With its metadata extension in the 8th position: [cache_salt].
		[]any{"BlockStored", []any{int64(6)}, nil, seqTokens(0, 16), 16, nil, nil, []any{"tenant-a"}},
		// New versions: tagged maps with a metadata map.
		ordered{{"type", "BlockStored"}, {"block_hashes", []any{7}}, {"token_ids", seqTokens(0, 16)},
			{"block_size", 16}, {"metadata", ordered{{"cache_salt", "tenant-b"}}}},
		[]any{"BlockRemoved", []any{int64(-5)}, "CPU_PINNED"},
	}, 1}) // attn_dp_rank
	b := decodeOK(t, payload)
	if len(b.Events) != 4 || b.DataParallelRank != 1 {
		t.Fatalf("batch %+v", b)
	}
	if e := b.Events[0]; e.Medium != "CPU_PINNED" || e.BlockHashes[0] != math.MaxUint64-4 || TierOf(e.Medium) != TierCPU {
		t.Fatalf("7-element %+v", e)
	}
	if e := b.Events[1]; e.CacheSalt != "tenant-a" || e.HasLoRAName || e.Medium != MediumGPU {
		t.Fatalf("with metadata %+v", e)
	}
	if e := b.Events[2]; e.CacheSalt != "tenant-b" || e.BlockHashes[0] != 7 {
		t.Fatalf("map with metadata %+v", e)
	}
}

func TestDecodeSkipsUnknownEventsAndExtraFields(t *testing.T) {
	payload := pack(t, []any{1.0, []any{
		[]any{"BlockMoved", []any{1}, "GPU"},
		ordered{{"type", "Whatever"}, {"x", 1}},
		[]any{"BlockRemoved", []any{uint64(3)}, "GPU", 0, "appended", []any{1, 2}, ordered{{"k", "v"}}},
		[]any{"AllBlocksCleared", "appended"},
	}})
	b := decodeOK(t, payload)
	if b.Unknown != 2 || len(b.Events) != 2 || b.Events[0].BlockHashes[0] != 3 || b.Events[1].Kind != AllBlocksCleared {
		t.Fatalf("batch %+v", b)
	}
}

func TestDecodeFrames(t *testing.T) {
	payload := pack(t, []any{1.0, []any{}})
	seq := binary.BigEndian.AppendUint64(nil, 1<<40+5)
	var d Decoder
	b, err := d.DecodeFrames([][]byte{[]byte("kv@10.1.2.3@org/model@v2"), seq, payload})
	if err != nil {
		t.Fatal(err)
	}
	if b.Seq != 1<<40+5 || b.Topic != "kv@10.1.2.3@org/model@v2" || b.Endpoint != "10.1.2.3" || b.Model != "org/model@v2" {
		t.Fatalf("batch %+v", b)
	}
	for name, frames := range map[string][][]byte{
		"two frames":   {seq, payload},
		"four frames":  {[]byte("kv@a@m"), seq, payload, payload},
		"short seq":    {[]byte("kv@a@m"), seq[:7], payload},
		"empty seq":    {[]byte("kv@a@m"), nil, payload},
		"long seq":     {[]byte("kv@a@m"), append(seq, 0), payload},
		"empty frames": {},
	} {
		if _, err := d.DecodeFrames(frames); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}

func TestParseTopic(t *testing.T) {
	for _, c := range []struct{ topic, endpoint, model string }{
		{"kv@10.0.0.1@llama", "10.0.0.1", "llama"},
		{"kv@10.0.0.1:8000@meta-llama/Llama-3.1-8B", "10.0.0.1:8000", "meta-llama/Llama-3.1-8B"},
		{"kv@[fe80::1]:8000@m@rev", "[fe80::1]:8000", "m@rev"},
		{"kv@pod@", "pod", ""},
	} {
		e, m, ok := ParseTopic(c.topic)
		if !ok || e != c.endpoint || m != c.model {
			t.Errorf("ParseTopic(%q) = %q, %q, %v", c.topic, e, m, ok)
		}
	}
	for _, bad := range []string{"", "kv", "kv@pod", "kv-events"} {
		if _, _, ok := ParseTopic(bad); ok {
			t.Errorf("ParseTopic(%q) ok", bad)
		}
	}
}

func TestDecodeRejectsBadInput(t *testing.T) {
	valid := pack(t, []any{1.0, []any{
		[]any{"BlockStored", []any{uint64(1), uint64(2)}, nil, seqTokens(0, 32), 16, nil, "GPU"},
	}})
	deep := []byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x92, 0xa4, 'X', 'Y', 'Z', 'W'}
	for range 100 {
		deep = append(deep, 0x91)
	}
	cases := map[string][]byte{
		"empty":              nil,
		"garbage":            []byte("not msgpack at all"),
		"nil":                {0xc0},
		"int batch":          pack(t, 5),
		"one element":        pack(t, []any{1.0}),
		"string ts":          pack(t, []any{"now", []any{}}),
		"events not array":   pack(t, []any{1.0, "x"}),
		"map without events": pack(t, ordered{{"ts", 1.0}}),
		"event scalar":       pack(t, []any{1.0, []any{7}}),
		"empty event":        pack(t, []any{1.0, []any{[]any{}}}),
		"map without type":   pack(t, []any{1.0, []any{ordered{{"block_hashes", []any{1}}}}}),
		"int tag":            pack(t, []any{1.0, []any{[]any{1, []any{1}}}}),
		"hash of 5 bytes":    pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{[]byte{1, 2, 3, 4, 5}}}}}),
		"hash of 65 bytes":   pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{make([]byte, 65)}}}}),
		"string hash":        pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{"abc"}}}}),
		"float hash":         pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{1.5}}}}),
		"negative token":     pack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{-1}, 16}}}),
		"huge token":         pack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{uint64(1 << 33)}, 16}}}),
		"negative size":      pack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{}, -16}}}),
		"string medium int":  pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{1}, 5}}}),
		"trailing bytes":     append(slices.Clone(valid), 0x01),
		"deep nesting":       deep,
		"huge array claim":   {0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff},
		"huge string claim":  {0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x92, 0xdb, 0xff, 0xff, 0xff, 0xff},
	}
	for i := range len(valid) { // every truncation of a valid payload
		cases["truncated at "+string(rune('0'+i%10))+strings.Repeat("'", i/10)] = valid[:i]
	}
	var d Decoder
	for name, payload := range cases {
		if b, err := d.Decode("kv@a@m", 0, payload); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %+v, %v; want ErrMalformed", name, b, err)
		}
	}
	// The decoder still works after errors.
	if _, err := d.Decode("kv@a@m", 0, valid); err != nil {
		t.Fatal(err)
	}
	d.MaxPayload = 10
	if _, err := d.Decode("kv@a@m", 0, valid); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversized payload: %v", err)
	}
}

func TestDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	payload := p4Payload(t, 1, 0)
	var d Decoder
	d.Decode("kv@a@m", 0, payload) //nolint:errcheck // warm up
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := d.Decode("kv@a@m", 0, payload); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per decode, want 0", allocs)
	}
}

// p4Payload is BENCHMARKS.md P4's message: a vLLM array-format batch with
// one BlockStored of 16 blocks × 16 tokens, hashes derived from seed and
// chained from the parent index's block (0: none).
func p4Payload(t testing.TB, seed uint64, parent int) []byte {
	hashes := make([]any, 16)
	for i := range hashes {
		hashes[i] = mix(seed<<20 | uint64(parent+i+1))
	}
	var par any
	if parent > 0 {
		par = mix(seed<<20 | uint64(parent))
	}
	tokens := make([]any, 256)
	for i := range tokens {
		tokens[i] = uint32(mix(seed<<32|uint64(parent*16+i)) % 128256)
	}
	return pack(t, []any{1712345678.25, []any{
		[]any{"BlockStored", hashes, par, tokens, 16, nil, "GPU", nil},
	}, 0})
}

func FuzzDecode(f *testing.F) {
	f.Add(pack(f, []any{1.0, []any{
		[]any{"BlockStored", []any{uint64(1), uint64(2)}, nil, seqTokens(0, 32), 16, nil, "GPU", nil, []any{[]any{"s"}, nil}},
		[]any{"BlockRemoved", []any{uint64(1)}, "CPU"},
		[]any{"AllBlocksCleared"},
	}, 0}))
	f.Add(pack(f, ordered{{"ts", 1.0}, {"events", []any{ordered{{"type", "BlockStored"}, {"block_hashes", []any{[]byte("0123456789abcdef")}},
		{"token_ids", seqTokens(0, 16)}, {"block_size", 16}, {"metadata", []any{"salt"}}}}}}))
	f.Add(pack(f, []any{1.0, []any{[]any{"BlockStored", []any{int64(-5)}, nil, seqTokens(0, 16), 16, nil, "CPU_PINNED"}}}))
	f.Add([]byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90})
	var d Decoder
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := d.Decode("kv@10.0.0.1@m", 1, payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		for _, ev := range b.Events {
			if ev.Kind < BlockStored || ev.Kind > AllBlocksCleared {
				t.Fatalf("event kind %d", ev.Kind)
			}
		}
		// Whatever decodes must apply without breaking the index, alone and
		// after an earlier message (the first half of the same input).
		x, _ := NewEventIndex(EventIndexConfig{})
		if first, err := d.Decode("kv@10.0.0.1@m", 0, payload[:len(payload)/2]); err == nil {
			x.Apply("a", first)
			x.check(t)
		}
		b, _ = d.Decode("kv@10.0.0.1@m", 1, payload)
		x.Apply("a", b)
		x.Apply("b", b)
		x.check(t)
		x.Apply("a", b)
		x.check(t)
	})
}

// A claimed extension length beyond the payload is malformed, and skipping
// it must not make the decoder allocate (msgpack's Skip grew its buffer by
// 1 MiB per such message, without bound).
func TestDecodeHugeExtClaim(t *testing.T) {
	// [0.0, [["AllBlocksCleared", <ext>]]]: the extension is an extra field,
	// skipped.
	ev := func(ext ...byte) []byte {
		p := append([]byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x92, 0xb0}, "AllBlocksCleared"...)
		return append(p, ext...)
	}
	payloads := [][]byte{
		ev(0xc9, 0x7f, 0xff, 0xff, 0xff, 0x01), // ext32
		ev(0xc8, 0xff, 0xff, 0x01),             // ext16
		ev(0xc7, 0xff, 0x01),                   // ext8
		ev(0xd8, 0x01, 0x00),                   // fixext16
	}
	var d Decoder
	for _, p := range payloads {
		if _, err := d.Decode("kv@a@m", 0, p); !errors.Is(err, ErrMalformed) {
			t.Fatalf("% x: %v, want ErrMalformed", p, err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 50 {
		for _, p := range payloads {
			d.Decode("kv@a@m", 0, p) //nolint:errcheck // malformed
		}
	}
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Fatalf("decoding 200 malformed payloads allocated %d bytes", grown)
	}
	// A well-formed extension is skipped.
	ok := ev(0xc7, 0x02, 0x05, 0xaa, 0xbb)
	ok[11] = 0x93 // and a fixext1
	ok = append(ok, 0xd4, 0x01, 0x00)
	if b, err := d.Decode("kv@a@m", 0, ok); err != nil || len(b.Events) != 1 {
		t.Fatalf("well-formed extensions: %+v, %v", b, err)
	}
}

// FuzzDecodeStateful is FuzzDecode's original form: one index shared by
// every input, so sequences of messages are exercised.
func FuzzDecodeStateful(f *testing.F) {
	f.Add(pack(f, []any{1.0, []any{
		[]any{"BlockStored", []any{uint64(1), uint64(2)}, nil, seqTokens(0, 32), 16, nil, "GPU", nil, []any{[]any{"s"}, nil}},
		[]any{"BlockRemoved", []any{uint64(1)}, "CPU"},
		[]any{"AllBlocksCleared"},
	}, 0}))
	f.Add(pack(f, []any{1.0, []any{[]any{"BlockStored", []any{int64(-5)}, nil, seqTokens(0, 16), 16, nil, "CPU_PINNED"}}}))
	x, _ := NewEventIndex(EventIndexConfig{})
	var d Decoder
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := d.Decode("kv@10.0.0.1@m", 1, payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		x.Apply("a", b)
		x.Apply("b", b)
		x.check(t)
	})
}
