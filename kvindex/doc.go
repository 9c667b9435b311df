// Package kvindex tracks which endpoints are likely to hold which prompt
// prefixes in their KV cache, so a scheduler can send a request where its
// prefix is already computed.
//
// # Block hashes
//
// A prompt is a byte stream (for chat: the tools JSON, then each message's
// role and text). It is read as pseudo-tokens of 4 bytes and cut into blocks
// of blockTokens tokens (DefaultBlockTokens = 64, i.e. 256 bytes). Block i is
// named by a chained hash
//
//	h₀ = xxhash64(model ‖ salt)
//	hᵢ = xxhash64(xxhash64(block i) ‖ hᵢ₋₁)
//
// so hᵢ stands for the whole prefix up to block i, like the engine's own
// prefix cache. The trailing partial block counts, and at most maxBlocks
// blocks are hashed. ChainHasher computes this from streamed pieces at close
// to raw xxhash speed, allocating nothing; HashPrompt does it for one string.
// Requests that carry token ids hash them with ChainHasher.WriteTokens.
//
// # The approximate index
//
// PrefixIndex learns from routing decisions rather than from the engines:
// after a request is sent to an endpoint, Add credits that endpoint with the
// request's blocks; Match later tells, for each candidate endpoint, how many
// leading blocks of a new request it holds. Only a run of consecutive blocks
// from block 0 counts, as only such a run can be reused by the engine.
//
// Each endpoint holds at most its capacity in index blocks (SetCapacity; use
// CapacityFromEngine to convert the engine's GPU block count). Beyond it the
// least recently used blocks go first and, among blocks last used together,
// the deepest first: like the engine, the index forgets a prefix's tail
// before its head, and an endpoint holding block i always holds blocks 0..i-1.
// RemoveEndpoint forgets an endpoint that left the pool.
//
// # Memory layout
//
// The distinct block hashes form a forest (block 0s are roots; every other
// block hangs off the block before it). Each block is a 12-byte node in a
// chunked slab: the low half of its hash, its parent, and an interned set of
// the endpoints holding it. Endpoints are small integer ids; a set is a bitset
// shared by every node with the same holders, so a block costs the same
// whatever the number of endpoints holding it. A Robin Hood hash table of
// 8-byte slots (node index, 24 more hash bits, probe distance) kept between
// 72% and 90% full finds nodes by hash.
//
// Recency is kept per segment, not per entry: a segment is the run of blocks
// one Add credited that no later Add of the same endpoint has touched since.
// An endpoint's segments partition what it holds, oldest first; a new Add
// takes over the runs it refreshes and eviction trims the oldest segment from
// its tail. With long prompts that is well under 24 bytes per (block,
// endpoint) entry — about 21.5 for a million entries of 2,048-block chains —
// plus about 40 bytes per segment.
//
// # Shared indexes
//
// The producers use the indexes through two small interfaces, PrefixStore
// and EventStore, which PrefixIndex and EventIndex implement and which an
// index kept elsewhere can implement too: kvindex/redisindex keeps both in
// Redis so that several picker replicas share them. EventKeys computes the
// precise index's keys for any such implementation; kvindextest holds the
// conformance suites every implementation must pass. This package imports
// no database client.
//
// # Concurrency
//
// A PrefixIndex is safe for concurrent use: Match calls share a read lock;
// Add, SetCapacity and RemoveEndpoint take the write lock. A ChainHasher
// belongs to one goroutine.
package kvindex
