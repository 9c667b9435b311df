package kvindex

import (
	"crypto/sha256"
	"encoding/binary"
)

// VLLMHasher computes the block hashes of vLLM's sha256_cbor algorithm, so
// an index can be keyed by the engine's own hashes when its seed is known:
//
//	NONE_HASH = sha256(cbor(seed))                 seed: PYTHONHASHSEED as a string
//	hᵢ        = sha256(cbor([hᵢ₋₁ or NONE_HASH, [tokens of block i], extra_keys]))
//
// with canonical CBOR, extra_keys = [LoRA name?, cache salt (block 0 only)?]
// or null when empty, and each hash published as the low 64 bits of the
// digest (its last 8 bytes, big-endian), as vLLM's KV events do with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES. Only full blocks are hashed. Requests
// with multimodal inputs or prompt embeddings carry extra keys this hasher
// does not know; their hashes do not match the engine's.
//
// A VLLMHasher is immutable and safe for concurrent use.
type VLLMHasher struct {
	none [sha256.Size]byte
}

// NewVLLMHasher returns a hasher for the engine's hash seed.
func NewVLLMHasher(seed string) *VLLMHasher {
	var h VLLMHasher
	h.none = sha256.Sum256(cborText(nil, seed))
	return &h
}

// NoneHash returns NONE_HASH, the parent of every block 0.
func (h *VLLMHasher) NoneHash() [sha256.Size]byte { return h.none }

// AppendHashes appends the hashes of the full blocks of tokens (blockSize
// tokens each, at most maxBlocks; maxBlocks ≤ 0 means no limit) to dst.
// lora is the request's LoRA adapter name ("" for the base model), salt its
// cache salt.
func (h *VLLMHasher) AppendHashes(dst []uint64, tokens []uint32, blockSize int, lora, salt string, maxBlocks int) []uint64 {
	if blockSize <= 0 {
		return dst
	}
	n := len(tokens) / blockSize
	if maxBlocks > 0 {
		n = min(n, maxBlocks)
	}
	var stack [1024]byte
	parent := h.none
	for i := range n {
		buf := h.blockCBOR(stack[:0], &parent, tokens[i*blockSize:(i+1)*blockSize], lora, salt, i == 0)
		parent = sha256.Sum256(buf)
		dst = append(dst, binary.BigEndian.Uint64(parent[sha256.Size-8:]))
	}
	return dst
}

// blockCBOR appends the canonical CBOR of (parent, tokens, extra_keys).
func (h *VLLMHasher) blockCBOR(buf []byte, parent *[sha256.Size]byte, tokens []uint32, lora, salt string, first bool) []byte {
	buf = cborHead(buf, 4, 3)
	buf = cborHead(buf, 2, uint64(len(parent)))
	buf = append(buf, parent[:]...)
	buf = cborHead(buf, 4, uint64(len(tokens)))
	for _, t := range tokens {
		buf = cborHead(buf, 0, uint64(t))
	}
	extra := 0
	if lora != "" {
		extra++
	}
	if first && salt != "" {
		extra++
	}
	if extra == 0 {
		return append(buf, 0xf6) // null
	}
	buf = cborHead(buf, 4, uint64(extra))
	if lora != "" {
		buf = cborText(buf, lora)
	}
	if first && salt != "" {
		buf = cborText(buf, salt)
	}
	return buf
}

// cborHead appends the shortest head of a CBOR item of major type major and
// argument n.
func cborHead(buf []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(buf, m|byte(n))
	case n <= 0xff:
		return append(buf, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(buf, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(buf, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(buf, m|27), n)
}

func cborText(buf []byte, s string) []byte {
	return append(cborHead(buf, 3, uint64(len(s))), s...)
}
