package kvindex

import (
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Why StoredKeys could not key an event's blocks.
var (
	// ErrBlockSizeMismatch means the event's blocks are not BlockTokens
	// tokens long.
	ErrBlockSizeMismatch = errors.New("kvindex: stored blocks of another block size than the index's")
	// ErrMalformedBlocks means the token count is not blocks × block size,
	// the extra keys do not parse, or a store without token ids reached
	// StoredKeys under HashXXH64.
	ErrMalformedBlocks = errors.New("kvindex: malformed stored blocks")
	// ErrUnknownParent means the event continues a chain from a parent hash
	// the caller could not resolve.
	ErrUnknownParent = errors.New("kvindex: stored blocks continue an unknown parent")
)

// EventKeys computes the keys the precise index gives blocks: for a
// request's token ids (BlockKeys) and for the blocks a BlockStored event
// reports (StoredKeys). It is what an index of engine events — the
// in-memory EventIndex, or one kept elsewhere, like kvindex/redisindex — needs
// to agree on keys with every other.
//
// BlockKeys is safe for concurrent use; StoredKeys is not (it keeps scratch
// space for the event's extra keys).
type EventKeys struct {
	bt     int
	exact  bool
	vllm   *VLLMHasher
	xdec   Decoder      // parses extra keys
	extras []blockExtra // per block of the event being keyed
}

// blockExtra is what a block's extra keys add to its key.
type blockExtra struct {
	opaque bool   // multimodal or embedding keys: fold hash into the key
	hash   uint64 // of the block's raw extra keys
}

// NewEventKeys returns the keys of cfg's block size and algorithm (the
// weights of cfg play no part).
func NewEventKeys(cfg EventIndexConfig) (*EventKeys, error) {
	switch cfg.Algorithm {
	case "", HashXXH64, HashSHA256CBOR:
	default:
		return nil, fmt.Errorf("kvindex: unknown hash algorithm %q (want %s or %s)", cfg.Algorithm, HashXXH64, HashSHA256CBOR)
	}
	if cfg.BlockTokens < 0 {
		return nil, errors.New("kvindex: BlockTokens must be ≥ 0")
	}
	k := &EventKeys{bt: cfg.BlockTokens, exact: cfg.Algorithm == HashSHA256CBOR}
	if k.bt == 0 {
		k.bt = DefaultEventBlockTokens
	}
	if k.exact {
		k.vllm = NewVLLMHasher(cfg.HashSeed)
	}
	return k, nil
}

// BlockTokens returns the tokens per block.
func (k *EventKeys) BlockTokens() int { return k.bt }

// Exact reports whether blocks are keyed by the engines' own hashes
// (HashSHA256CBOR): an engine hash is then its block's key, and no mapping
// from engine hashes to keys is needed.
func (k *EventKeys) Exact() bool { return k.exact }

// BlockKeys appends the keys of the full blocks of a request's token ids (at
// most maxBlocks; ≤ 0 means DefaultMaxBlocks) to dst. model is the model the
// request is served as (after rewrites; a LoRA adapter's name for LoRA
// requests) and salt its cache salt. baseModel matters only for exact keys:
// it says model is a base model the engines publish events for, not a LoRA
// adapter. It allocates only if dst must grow.
func (k *EventKeys) BlockKeys(dst []uint64, model, salt string, tokens []uint32, maxBlocks int, baseModel bool) []uint64 {
	if maxBlocks <= 0 {
		maxBlocks = DefaultMaxBlocks
	}
	if k.exact {
		lora := model
		if baseModel {
			lora = ""
		}
		return k.vllm.AppendHashes(dst, tokens, k.bt, lora, salt, maxBlocks)
	}
	var c ChainHasher
	c.Reset(model, salt, k.bt, maxBlocks)
	c.sums = dst
	c.Write(tokenBytes(tokens[:min(len(tokens), maxBlocks*k.bt)], nil))
	return c.sums // full blocks only
}

// StoredKeys appends to dst the keys of the blocks a BlockStored event of
// model (the batch's) reports, one per ev.BlockHashes, in order. Under
// HashXXH64 the event must carry its blocks' token ids, and when it names a
// parent (ev.HasParent) the caller passes the parent block's key, resolved
// from the engine hash, with parentOK; the keys chain on from it. Under
// HashSHA256CBOR the keys are the engine hashes themselves. A key is never
// 0 (a 0 becomes 1; Match and lookups treat 0 the same way).
//
// The errors are ErrBlockSizeMismatch, ErrMalformedBlocks and
// ErrUnknownParent, checked in that order; dst is then returned unchanged.
func (k *EventKeys) StoredKeys(dst []uint64, model string, ev *Event, parent uint64, parentOK bool) ([]uint64, error) {
	n := len(ev.BlockHashes)
	if k.exact {
		for _, h := range ev.BlockHashes {
			dst = append(dst, normKey(h))
		}
		return dst, nil
	}
	if n == 0 {
		return dst, nil
	}
	if len(ev.TokenIDs) == 0 {
		return dst, ErrMalformedBlocks
	}
	bs := ev.BlockSize
	if bs == 0 {
		bs = len(ev.TokenIDs) / n
	}
	if bs != k.bt {
		return dst, ErrBlockSizeMismatch
	}
	if len(ev.TokenIDs) != n*bs {
		return dst, ErrMalformedBlocks
	}
	if ev.LoRAName != "" {
		model = ev.LoRAName
	}
	extras, salt, ok := k.parseExtras(ev, n, ev.CacheSalt)
	if !ok {
		return dst, ErrMalformedBlocks
	}
	var prev uint64
	if ev.HasParent {
		if !parentOK {
			return dst, ErrUnknownParent
		}
		prev = parent
	} else {
		prev = rootHash(model, salt)
	}
	var buf [4 * DefaultEventBlockTokens]byte
	for i := range n {
		content := xxhash.Sum64(tokenBytes(ev.TokenIDs[i*bs:(i+1)*bs], buf[:0]))
		if extras != nil && extras[i].opaque {
			content = chain(content, extras[i].hash)
		}
		prev = chain(content, prev)
		dst = append(dst, normKey(prev))
	}
	return dst, nil
}

// EngineHash places an engine's block hash h in the namespace of model, as
// the precise index keys its mappings from engine hashes to block keys:
// engine hashes do not include the model, so engines of different models
// must not share mappings.
func EngineHash(model string, h uint64) uint64 { return mixHash(h, xxhash.Sum64String(model)) }

// parseExtras reads an event's extra keys: the LoRA name (already in the
// root), the cache salt of block 0 (returned as salt), and anything else
// (multimodal hashes, embeddings), which makes the block's key opaque: it
// stays distinct from every text-only block. extras is nil when no block has
// opaque keys.
func (k *EventKeys) parseExtras(ev *Event, n int, salt string) (extras []blockExtra, _ string, ok bool) {
	if ev.ExtraKeys == nil {
		return nil, salt, true
	}
	d := &k.xdec
	d.payload = ev.ExtraKeys
	d.rd.Reset(ev.ExtraKeys)
	if d.dec == nil {
		d.dec = msgpackDecoder()
	}
	d.dec.ResetReader(&d.rd)
	m, err := d.length(d.dec.DecodeArrayLen())
	if err != nil || m != n {
		return nil, salt, false
	}
	k.extras = k.extras[:0]
	anyOpaque := false
	for i := range n {
		start := len(ev.ExtraKeys) - d.rd.Len()
		isNil, err := d.isNil()
		if err != nil {
			return nil, salt, false
		}
		e := blockExtra{}
		if !isNil {
			m, err := d.length(d.dec.DecodeArrayLen())
			if err != nil {
				return nil, salt, false
			}
			for j := range m {
				c, err := d.peek()
				if err != nil {
					return nil, salt, false
				}
				if !isString(c) {
					e.opaque = true
					if err := d.skip(1); err != nil {
						return nil, salt, false
					}
					continue
				}
				s, err := d.str()
				if err != nil {
					return nil, salt, false
				}
				switch {
				case j == 0 && ev.HasLoRAName && s == ev.LoRAName:
				case i == 0 && !ev.HasParent && salt == "":
					salt = s
				default:
					e.opaque = true
				}
			}
			if e.opaque {
				e.hash = xxhash.Sum64(ev.ExtraKeys[start : len(ev.ExtraKeys)-d.rd.Len()])
				anyOpaque = true
			}
		}
		k.extras = append(k.extras, e)
	}
	if !anyOpaque {
		return nil, salt, true
	}
	return k.extras, salt, true
}

// rootHash is ChainHasher's root: xxhash64(model ‖ salt).
func rootHash(model, salt string) uint64 {
	if salt == "" {
		return xxhash.Sum64String(model)
	}
	var d xxhash.Digest
	d.Reset()
	d.WriteString(model)
	d.WriteString(salt)
	return d.Sum64()
}
