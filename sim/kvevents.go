package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/requestcontrol/producers/precise"
)

// DefaultKVEventDelay is how long a server's KV events take to reach the
// picker's index (publish, transport, decode).
const DefaultKVEventDelay = 10 * time.Millisecond

// kvEvents collects one server's KV events during a step, as vLLM would
// publish them: BlockStored with the block's token ids and parent hash,
// BlockRemoved on eviction.
type kvEvents struct {
	events  []kvindex.Event
	models  []string // model of each event
	removed []uint64
	toks    []byte
}

// stored records that block i of q's prompt entered the cache.
func (e *kvEvents) stored(q *seq, i, blockTokens int) {
	parent, hasParent := uint64(0), i > 0
	if hasParent {
		parent = q.hashes[i-1]
	}
	e.storedBlock(q.req.Model, q.hashes[i], parent, hasParent, q.req.Units[i], blockTokens)
}

// storedBlock records that the block of content unit u, under hash h,
// entered the cache.
func (e *kvEvents) storedBlock(model string, h, parent uint64, hasParent bool, u uint64, blockTokens int) {
	e.flushRemoved(model)
	ev := kvindex.Event{Kind: kvindex.BlockStored, BlockHashes: []uint64{h}, BlockSize: blockTokens,
		Medium: kvindex.MediumGPU, TokenIDs: make([]uint32, blockTokens), ParentHash: parent, HasParent: hasParent}
	e.toks = appendUnit(e.toks[:0], u, 4*blockTokens)
	for k := range ev.TokenIDs {
		ev.TokenIDs[k] = binary.LittleEndian.Uint32(e.toks[4*k:])
	}
	e.events = append(e.events, ev)
	e.models = append(e.models, model)
}

// flushRemoved turns the evictions collected so far into a BlockRemoved.
func (e *kvEvents) flushRemoved(model string) {
	if len(e.removed) == 0 {
		return
	}
	e.events = append(e.events, kvindex.Event{Kind: kvindex.BlockRemoved, Medium: kvindex.MediumGPU,
		BlockHashes: append([]uint64(nil), e.removed...)})
	e.models = append(e.models, model)
	e.removed = e.removed[:0]
}

// take returns the batches of the events collected (one per run of events
// of the same model) and resets the collector.
func (e *kvEvents) take(base string) []*kvindex.Batch {
	e.flushRemoved(base)
	var out []*kvindex.Batch
	for i := 0; i < len(e.events); {
		j := i + 1
		for j < len(e.events) && e.models[j] == e.models[i] {
			j++
		}
		out = append(out, &kvindex.Batch{Model: e.models[i], Events: append([]kvindex.Event(nil), e.events[i:j]...)})
		i = j
	}
	clear(e.events)
	e.events, e.models = e.events[:0], e.models[:0]
	return out
}

// pendingKV is a server's batches on their way to the indexes.
type pendingKV struct {
	srv     int
	batches []*kvindex.Batch
}

// promptTokens is the simulator's tokenizer: each 4 prompt bytes are one
// token id (little-endian), the same pseudo-tokens the approximate producer
// hashes and the servers' KV events carry.
var promptTokens = precise.TokenizerFunc(func(_ context.Context, _ string, b *parsers.Body) ([]uint32, error) {
	if b == nil || b.Prompt == "" {
		return nil, errors.New("sim: no prompt")
	}
	p := b.Prompt
	toks := make([]uint32, (len(p)+3)/4)
	for i := range toks {
		var w [4]byte
		copy(w[:], p[4*i:])
		toks[i] = binary.LittleEndian.Uint32(w[:])
	}
	return toks, nil
})
