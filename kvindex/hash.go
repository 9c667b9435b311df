package kvindex

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Defaults of the approximate prefix model (SPEC §5.1).
const (
	// DefaultBlockTokens is the number of 4-byte pseudo-tokens per block
	// (256 prompt bytes): the floor that bounds the index's memory.
	DefaultBlockTokens = 64
	// DefaultMaxBlocks is the number of leading blocks hashed at most.
	DefaultMaxBlocks = 2048
)

// ChainHasher turns a byte stream into chained block hashes (SPEC §5.1).
//
// The stream is cut into pseudo-tokens of 4 bytes (a little-endian uint32,
// the last one zero-padded) and the tokens into blocks of blockTokens. Block
// i has the content hash cᵢ = xxhash64(its bytes) and the chained hash
// hᵢ = xxhash64(cᵢ ‖ hᵢ₋₁), both as 8 little-endian bytes, from the root
// h₀ = xxhash64(model ‖ salt). hᵢ stands for the whole prefix up to block i.
// The trailing partial block counts: its bytes are zero-padded to the end of
// its last token, not to the full block. At most maxBlocks blocks are hashed.
//
// Writes may cut the stream anywhere. A block that lies inside one write is
// hashed in place; only blocks that straddle writes go through the digest's
// small buffer, so hashing runs close to raw xxhash speed and allocates
// nothing once the hasher has been used (reuse it, e.g. from a sync.Pool).
//
// Call Reset before the first write. A ChainHasher is not safe for concurrent
// use.
type ChainHasher struct {
	block     xxhash.Digest // content of the block being filled
	fill      int           // bytes written to block
	blockSize int           // bytes per block
	maxBlocks int
	n         int      // complete blocks hashed
	prev      uint64   // hash of the last complete block, or the root
	sums      []uint64 // hashes of the complete blocks
}

// Reset starts a new stream for the given model (after any rewrite) and
// cache salt. A blockTokens or maxBlocks that is not positive selects
// DefaultBlockTokens or DefaultMaxBlocks.
func (c *ChainHasher) Reset(model, salt string, blockTokens, maxBlocks int) {
	if blockTokens <= 0 {
		blockTokens = DefaultBlockTokens
	}
	if maxBlocks <= 0 {
		maxBlocks = DefaultMaxBlocks
	}
	c.blockSize = 4 * blockTokens
	c.maxBlocks = maxBlocks
	if salt == "" {
		c.prev = xxhash.Sum64String(model)
	} else {
		c.block.Reset()
		c.block.WriteString(model)
		c.block.WriteString(salt)
		c.prev = c.block.Sum64()
	}
	c.block.Reset()
	c.fill = 0
	c.n = 0
	c.sums = c.sums[:0]
}

// Full reports whether maxBlocks blocks are complete: further writes are
// ignored, so callers can stop producing the stream.
func (c *ChainHasher) Full() bool { return c.n >= c.maxBlocks }

// Write appends p to the stream. It always returns len(p), nil.
func (c *ChainHasher) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !c.Full() {
		if c.fill == 0 && len(p) >= c.blockSize {
			p = c.writeBlocks(p)
			continue
		}
		k := min(c.blockSize-c.fill, len(p))
		c.block.Write(p[:k])
		c.fill += k
		p = p[k:]
		if c.fill == c.blockSize {
			c.emit(c.block.Sum64())
			c.block.Reset()
			c.fill = 0
		}
	}
	return n, nil
}

// writeBlocks hashes the whole blocks at the start of p (at least one) in
// place and returns the rest.
func (c *ChainHasher) writeBlocks(p []byte) []byte {
	bs := c.blockSize
	k := min(len(p)/bs, c.maxBlocks-c.n)
	n := len(c.sums)
	c.sums = slices.Grow(c.sums, k)[:n+k]
	if bs == 4*DefaultBlockTokens {
		c.prev = chainBlocks256(c.sums[n:], p, c.prev)
	} else {
		c.prev = chainBlocks(c.sums[n:], p, bs, c.prev)
	}
	c.n += k
	return p[k*bs:]
}

// chainBlocks sets out[i] to the chained hash of block i of p, blocks of bs
// bytes, after prev, and returns the last. The chain is a serial dependency:
// the loop keeps it in a register and hashes the content of block i+1 before
// chaining block i, letting the CPU overlap the two.
func chainBlocks(out []uint64, p []byte, bs int, prev uint64) uint64 {
	content := xxhash.Sum64(p[:bs])
	for i := range len(out) - 1 {
		p = p[bs:]
		next := xxhash.Sum64(p[:bs])
		prev = chain(content, prev)
		out[i] = prev
		content = next
	}
	prev = chain(content, prev)
	out[len(out)-1] = prev
	return prev
}

// chainBlocks256 is chainBlocks for the default block size; the constant
// makes it a few percent faster, which is what keeps 6k prompts above 60% of
// raw xxhash speed.
func chainBlocks256(out []uint64, p []byte, prev uint64) uint64 {
	const bs = 4 * DefaultBlockTokens
	content := xxhash.Sum64(p[:bs])
	for i := range len(out) - 1 {
		p = p[bs:]
		next := xxhash.Sum64(p[:bs])
		prev = chain(content, prev)
		out[i] = prev
		content = next
	}
	prev = chain(content, prev)
	out[len(out)-1] = prev
	return prev
}

// WriteString appends s to the stream without copying it. It always returns
// len(s), nil.
func (c *ChainHasher) WriteString(s string) (int, error) {
	// Write only reads p and does not keep it, so viewing s as bytes is safe.
	return c.Write(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// WriteTokens appends token ids to the stream, 4 little-endian bytes each.
func (c *ChainHasher) WriteTokens(ids []uint32) {
	var buf [512]byte
	for len(ids) > 0 && !c.Full() {
		k := min(len(ids), len(buf)/4)
		for i, id := range ids[:k] {
			binary.LittleEndian.PutUint32(buf[4*i:], id)
		}
		c.Write(buf[:4*k])
		ids = ids[k:]
	}
}

// AppendSum appends the hashes of the stream's blocks, the trailing partial
// block included, to dst and returns the extended slice. It does not change
// the stream: more writes may follow.
func (c *ChainHasher) AppendSum(dst []uint64) []uint64 {
	return c.appendPartial(append(dst, c.sums...))
}

// appendPartial appends the hash of the trailing partial block, if any.
func (c *ChainHasher) appendPartial(dst []uint64) []uint64 {
	if c.fill == 0 {
		return dst
	}
	var zeros [3]byte
	d := c.block
	d.Write(zeros[:(4-c.fill%4)%4])
	return append(dst, chain(d.Sum64(), c.prev))
}

func (c *ChainHasher) emit(content uint64) {
	c.prev = chain(content, c.prev)
	c.sums = append(c.sums, c.prev)
	c.n++
}

// HashPrompt appends the chained block hashes of prompt to dst and returns
// the extended slice; it allocates only if dst must grow. See ChainHasher.
func HashPrompt(dst []uint64, model, salt, prompt string, blockTokens, maxBlocks int) []uint64 {
	var c ChainHasher
	c.Reset(model, salt, blockTokens, maxBlocks)
	c.sums = dst // the hashes go straight after dst's elements
	whole := len(prompt) - len(prompt)%c.blockSize
	c.WriteString(prompt[:whole])
	if tail := prompt[whole:]; tail != "" && !c.Full() {
		c.sums = append(c.sums, chain(sumPadded(tail), c.prev))
	}
	return c.sums
}

// sumPadded returns xxhash64 of s zero-padded to a multiple of 4 bytes.
func sumPadded(s string) uint64 {
	if len(s)%4 == 0 {
		return xxhash.Sum64String(s)
	}
	var d xxhash.Digest
	d.Reset()
	d.WriteString(s)
	d.Write(make([]byte, 4-len(s)%4))
	return d.Sum64()
}

// chain returns xxhash64 of the 16 bytes content ‖ prev (little-endian),
// computed directly: for inputs shorter than 32 bytes XXH64 is two rounds and
// the final avalanche.
func chain(content, prev uint64) uint64 {
	const (
		prime1 uint64 = 11400714785074694791
		prime2 uint64 = 14029467366897019727
		prime3 uint64 = 1609587929392839161
		prime4 uint64 = 9650029242287828579
		prime5 uint64 = 2870177450012600261
	)
	k1 := bits.RotateLeft64(content*prime2, 31) * prime1
	h := bits.RotateLeft64((prime5+16)^k1, 27)*prime1 + prime4
	k2 := bits.RotateLeft64(prev*prime2, 31) * prime1
	h = bits.RotateLeft64(h^k2, 27)*prime1 + prime4
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	return h ^ h>>32
}
