package kvindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// EventKind is the type of a KV-cache event.
type EventKind uint8

// The KV-cache event types engines publish (SPEC §5.2).
const (
	// BlockStored reports full blocks entering a cache tier.
	BlockStored EventKind = iota + 1
	// BlockRemoved reports blocks leaving a cache tier.
	BlockRemoved
	// AllBlocksCleared reports that the engine dropped its whole prefix cache.
	AllBlocksCleared
)

// String returns the engines' tag for k ("BlockStored", ...).
func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// MediumGPU is the medium of blocks in GPU memory, and of events that name
// none.
const MediumGPU = "GPU"

// Event is one decoded KV-cache event. Optional fields the engine sent as nil
// or left out have their Has flag false.
type Event struct {
	Kind EventKind
	// BlockHashes are the engine's block hashes: msgpack integers as their
	// 64-bit pattern (a negative int64 is reinterpreted), digests as their
	// last 8 bytes big-endian.
	BlockHashes []uint64
	// ParentHash is the hash of the block before the first one stored.
	ParentHash uint64
	HasParent  bool
	// TokenIDs are the tokens of the stored blocks, BlockSize per block; empty
	// for stores that only moved blocks to another tier.
	TokenIDs  []uint32
	BlockSize int
	LoRAID    int64
	HasLoRAID bool
	// Medium is where the blocks are: "GPU" (also when the engine sent none),
	// "CPU", "CPU_PINNED", "DISK", ...
	Medium      string
	LoRAName    string
	HasLoRAName bool
	// ExtraKeys is the raw msgpack of extra_keys (one entry per block: the
	// LoRA name, multimodal hashes, the cache salt...), nil when absent.
	ExtraKeys []byte
	GroupIdx  int64
	HasGroup  bool
	// SpecKind and SlidingWindow describe the block's KV-cache group
	// (kv_cache_spec_kind, kv_cache_spec_sliding_window).
	SpecKind         string
	SlidingWindow    int64
	HasSlidingWindow bool
	// CacheSalt is the salt SGLang sends in its metadata extension.
	CacheSalt string
}

// Batch is one decoded KV-event message: the topic's parts, the sequence
// number and the payload's events.
type Batch struct {
	Topic string
	// Endpoint and Model come from the topic kv@<endpoint>@<model>; both are
	// empty when the topic does not follow the convention.
	Endpoint, Model string
	Seq             uint64
	Timestamp       float64
	// DataParallelRank is the publisher's data-parallel rank (0 when absent).
	DataParallelRank int64
	HasRank          bool
	Events           []Event
	// Unknown counts events of types this decoder does not know; they are
	// skipped.
	Unknown int
}

// ParseTopic splits a topic of the form kv@<endpoint>@<model>. The prefix is
// everything before the first '@'; the endpoint runs to the next '@' (an IP
// address, host name or host:port never contains one); the model is the rest
// and may contain '@'. ok is false when there are fewer than two '@'.
func ParseTopic(topic string) (endpoint, model string, ok bool) {
	_, rest, ok := strings.Cut(topic, "@")
	if !ok {
		return "", "", false
	}
	endpoint, model, ok = strings.Cut(rest, "@")
	if !ok {
		return "", "", false
	}
	return endpoint, model, true
}

// Decoding errors. Every error Decode returns wraps ErrMalformed.
var (
	// ErrMalformed marks a message that cannot be decoded: wrong frame count,
	// short sequence frame, truncated or invalid msgpack, fields of the wrong
	// type. Such a message is dropped whole; nothing of it is applied.
	ErrMalformed = errors.New("kvindex: malformed KV-event message")
)

// Limits of the decoder: bigger messages are malformed (a publisher flood
// must not exhaust memory or the stack).
const (
	// DefaultMaxPayload is the largest payload Decode accepts, in bytes.
	DefaultMaxPayload = 16 << 20
	maxDepth          = 32 // msgpack nesting skipped at most
	maxHashBytes      = 64 // longest digest accepted as a block hash
)

// Decoder decodes KV-event messages (SPEC §5.2) with msgpack. It accepts
// every layout the engines publish:
//
//   - the batch as [ts, events], [ts, events, data_parallel_rank] or a map
//     {ts, events, data_parallel_rank} (SGLang's attn_dp_rank too);
//   - each event as a tagged array [tag, fields...] in the field order of
//     vLLM (missing trailing fields take their defaults, extra ones are
//     skipped, SGLang's metadata extension supplies the cache salt) or as a
//     map {"type": tag, field: value...} (unknown fields are skipped);
//   - hashes as unsigned or negative integers or digest bytes.
//
// Unknown event types are skipped and counted in Batch.Unknown. Any other
// problem makes the whole message malformed.
//
// A Decoder reuses its memory: the Batch Decode returns, and the slices in
// it, are valid until the next call. A Decoder is not safe for concurrent
// use; the zero value is ready.
type Decoder struct {
	// MaxPayload is the largest payload accepted; 0 means DefaultMaxPayload.
	MaxPayload int

	dec     *msgpack.Decoder
	rd      bytes.Reader
	batch   Batch
	hashes  []uint64
	tokens  []uint32
	raw     []byte
	strs    map[string]string // interned strings: media, LoRA names, tags
	topics  map[string]topicParts
	payload []byte
}

type topicParts struct{ topic, endpoint, model string }

// DecodeFrames decodes a message as received from the socket: the topic, the
// 8-byte big-endian sequence number and the payload.
func (d *Decoder) DecodeFrames(frames [][]byte) (*Batch, error) {
	if len(frames) != 3 {
		return nil, fmt.Errorf("%w: %d frames, want 3 (topic, sequence, payload)", ErrMalformed, len(frames))
	}
	if len(frames[1]) != 8 {
		return nil, fmt.Errorf("%w: sequence frame of %d bytes, want 8", ErrMalformed, len(frames[1]))
	}
	b, err := d.decode(frames[2])
	if err != nil {
		return nil, err
	}
	b.Seq = binary.BigEndian.Uint64(frames[1])
	d.setTopic(frames[0])
	return b, nil
}

// Decode decodes payload, received with topic and sequence number seq.
func (d *Decoder) Decode(topic string, seq uint64, payload []byte) (*Batch, error) {
	b, err := d.decode(payload)
	if err != nil {
		return nil, err
	}
	b.Seq = seq
	b.Topic = topic
	b.Endpoint, b.Model, _ = ParseTopic(topic)
	return b, nil
}

// setTopic sets the batch's topic fields, interning the topics seen (a
// publisher uses one topic for its lifetime).
func (d *Decoder) setTopic(t []byte) {
	if d.topics == nil {
		d.topics = map[string]topicParts{}
	}
	p, ok := d.topics[string(t)]
	if !ok {
		if len(d.topics) >= 4096 {
			clear(d.topics)
		}
		p.topic = string(t)
		p.endpoint, p.model, _ = ParseTopic(p.topic)
		d.topics[p.topic] = p
	}
	d.batch.Topic, d.batch.Endpoint, d.batch.Model = p.topic, p.endpoint, p.model
}

func (d *Decoder) decode(payload []byte) (*Batch, error) {
	limit := d.MaxPayload
	if limit <= 0 {
		limit = DefaultMaxPayload
	}
	if len(payload) > limit {
		return nil, fmt.Errorf("%w: payload of %d bytes exceeds the limit of %d", ErrMalformed, len(payload), limit)
	}
	if d.dec == nil {
		d.dec = msgpack.NewDecoder(nil)
	}
	d.payload = payload
	d.rd.Reset(payload)
	d.dec.ResetReader(&d.rd)
	clear(d.batch.Events) // drop references to the previous payload's arrays
	d.batch = Batch{Events: d.batch.Events[:0]}
	d.hashes, d.tokens, d.raw = d.hashes[:0], d.tokens[:0], d.raw[:0]
	if err := d.decodeBatch(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if d.rd.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, d.rd.Len())
	}
	return &d.batch, nil
}

func (d *Decoder) peek() (byte, error) {
	if d.rd.Len() == 0 {
		return 0, errors.New("truncated")
	}
	return d.payload[d.pos()], nil
}

// isNil consumes a nil and reports whether there was one.
func (d *Decoder) isNil() (bool, error) {
	c, err := d.peek()
	if err != nil {
		return false, err
	}
	if c == msgpcode.Nil {
		d.rd.ReadByte() //nolint:errcheck // peeked
		return true, nil
	}
	return false, nil
}

// length checks a claimed element count against the bytes left (every
// element takes at least one byte); a nil array or map has length 0.
func (d *Decoder) length(n int, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	if n > d.rd.Len() {
		return 0, fmt.Errorf("%d elements claimed, %d bytes left", n, d.rd.Len())
	}
	return max(n, 0), nil
}

func (d *Decoder) decodeBatch() error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	b := &d.batch
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.length(d.dec.DecodeArrayLen())
		if err != nil {
			return err
		}
		if n < 2 {
			return fmt.Errorf("batch array of %d elements, want ts and events", n)
		}
		if b.Timestamp, err = d.float(); err != nil {
			return fmt.Errorf("ts: %v", err)
		}
		if err := d.events(); err != nil {
			return err
		}
		if n >= 3 {
			if b.DataParallelRank, b.HasRank, err = d.optInt(); err != nil {
				return fmt.Errorf("data_parallel_rank: %v", err)
			}
		}
		return d.skipN(n - 3)
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.length(d.dec.DecodeMapLen())
		if err != nil {
			return err
		}
		sawEvents := false
		for range n {
			key, err := d.key()
			if err != nil {
				return err
			}
			switch key {
			case "ts":
				if b.Timestamp, err = d.float(); err != nil {
					return fmt.Errorf("ts: %v", err)
				}
			case "events":
				if err := d.events(); err != nil {
					return err
				}
				sawEvents = true
			case "data_parallel_rank", "attn_dp_rank":
				if b.DataParallelRank, b.HasRank, err = d.optInt(); err != nil {
					return fmt.Errorf("%s: %v", key, err)
				}
			default:
				if err := d.skip(0); err != nil {
					return err
				}
			}
		}
		if !sawEvents {
			return errors.New("batch map without events")
		}
		return nil
	}
	return fmt.Errorf("batch is msgpack code %#x, want an array or a map", c)
}

func (d *Decoder) events() error {
	n, err := d.length(d.dec.DecodeArrayLen())
	if err != nil {
		return fmt.Errorf("events: %v", err)
	}
	for i := range n {
		if err := d.event(); err != nil {
			return fmt.Errorf("events[%d]: %v", i, err)
		}
	}
	return nil
}

// eventFields are the positions of the fields of a tagged array, after the
// tag, per event type (vLLM's order; SGLang's is a prefix of it).
var (
	storedFields  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"}
	removedFields = []string{"block_hashes", "medium", "group_idx"}
)

func fieldsOf(k EventKind) []string {
	switch k {
	case BlockStored:
		return storedFields
	case BlockRemoved:
		return removedFields
	}
	return nil
}

func (d *Decoder) event() error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	ev := Event{Medium: MediumGPU}
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.length(d.dec.DecodeArrayLen())
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("empty event array")
		}
		kind, known, err := d.tag()
		if err != nil {
			return err
		}
		if !known {
			d.batch.Unknown++
			return d.skipN(n - 1)
		}
		ev.Kind = kind
		fields := fieldsOf(kind)
		for i := range n - 1 {
			if i >= len(fields) {
				if err := d.skip(0); err != nil {
					return err
				}
				continue
			}
			if err := d.field(&ev, fields[i]); err != nil {
				return fmt.Errorf("%s.%s: %v", kind, fields[i], err)
			}
		}
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.length(d.dec.DecodeMapLen())
		if err != nil {
			return err
		}
		known, sawType := true, false
		for range n {
			key, err := d.key()
			if err != nil {
				return err
			}
			if key == "type" {
				ev.Kind, known, err = d.tag()
				if err != nil {
					return err
				}
				sawType = true
				continue
			}
			if err := d.field(&ev, key); err != nil {
				return fmt.Errorf("%s: %v", key, err)
			}
		}
		if !sawType {
			return errors.New("event map without type")
		}
		if !known {
			d.batch.Unknown++
			return nil
		}
	default:
		return fmt.Errorf("event is msgpack code %#x, want an array or a map", c)
	}
	d.batch.Events = append(d.batch.Events, ev)
	return nil
}

// tag reads an event's type tag.
func (d *Decoder) tag() (EventKind, bool, error) {
	s, err := d.str()
	if err != nil {
		return 0, false, fmt.Errorf("type tag: %v", err)
	}
	switch s {
	case "BlockStored":
		return BlockStored, true, nil
	case "BlockRemoved":
		return BlockRemoved, true, nil
	case "AllBlocksCleared":
		return AllBlocksCleared, true, nil
	}
	return 0, false, nil
}

// field decodes the named field into ev; unknown names are skipped.
func (d *Decoder) field(ev *Event, name string) error {
	var err error
	switch name {
	case "block_hashes":
		ev.BlockHashes, err = d.hashList()
	case "parent_block_hash":
		var isNil bool
		if isNil, err = d.isNil(); err == nil && !isNil {
			ev.ParentHash, err = d.hash()
			ev.HasParent = err == nil
		}
	case "token_ids":
		ev.TokenIDs, err = d.tokenList()
	case "block_size":
		var n int64
		n, _, err = d.optInt()
		if err == nil && (n < 0 || n > 1<<20) {
			err = fmt.Errorf("%d out of range", n)
		}
		ev.BlockSize = int(n)
	case "lora_id":
		ev.LoRAID, ev.HasLoRAID, err = d.optInt()
	case "medium":
		var s string
		var ok bool
		if s, ok, err = d.optStr(); err == nil && ok {
			ev.Medium = s
		}
	case "lora_name":
		// SGLang sends its metadata struct in this position.
		var c byte
		if c, err = d.peek(); err != nil {
			return err
		}
		if msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32 ||
			msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 {
			return d.metadata(ev)
		}
		ev.LoRAName, ev.HasLoRAName, err = d.optStr()
	case "metadata":
		return d.metadata(ev)
	case "extra_keys":
		var isNil bool
		if isNil, err = d.isNil(); err == nil && !isNil {
			start := len(d.payload) - d.rd.Len()
			if err = d.skip(0); err == nil {
				n := len(d.raw)
				d.raw = append(d.raw, d.payload[start:len(d.payload)-d.rd.Len()]...)
				ev.ExtraKeys = d.raw[n:len(d.raw):len(d.raw)]
			}
		}
	case "group_idx":
		ev.GroupIdx, ev.HasGroup, err = d.optInt()
	case "kv_cache_spec_kind":
		ev.SpecKind, _, err = d.optStr()
	case "kv_cache_spec_sliding_window":
		ev.SlidingWindow, ev.HasSlidingWindow, err = d.optInt()
	default:
		err = d.skip(0)
	}
	return err
}

// metadata reads SGLang's BlockStored metadata: [cache_salt] or
// {"cache_salt": s}.
func (d *Decoder) metadata(ev *Event) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	if msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 {
		n, err := d.length(d.dec.DecodeMapLen())
		if err != nil {
			return err
		}
		for range n {
			key, err := d.key()
			if err != nil {
				return err
			}
			if key == "cache_salt" {
				if ev.CacheSalt, _, err = d.optStr(); err != nil {
					return err
				}
				continue
			}
			if err := d.skip(0); err != nil {
				return err
			}
		}
		return nil
	}
	if isNil, err := d.isNil(); err != nil || isNil {
		return err
	}
	n, err := d.length(d.dec.DecodeArrayLen())
	if err != nil {
		return err
	}
	if n > 0 {
		if ev.CacheSalt, _, err = d.optStr(); err != nil {
			return err
		}
		return d.skipN(n - 1)
	}
	return nil
}

func (d *Decoder) hashList() ([]uint64, error) {
	if isNil, err := d.isNil(); err != nil || isNil {
		return nil, err
	}
	n, err := d.length(d.dec.DecodeArrayLen())
	if err != nil {
		return nil, err
	}
	start := len(d.hashes)
	for range n {
		h, err := d.hash()
		if err != nil {
			return nil, err
		}
		d.hashes = append(d.hashes, h)
	}
	return d.hashes[start:len(d.hashes):len(d.hashes)], nil
}

// hash reads a block hash: an integer (negative ones reinterpreted as their
// 64-bit pattern) or a digest (its last 8 bytes, big-endian).
func (d *Decoder) hash() (uint64, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	if msgpcode.IsBin(c) {
		n, err := d.dec.DecodeBytesLen()
		if err != nil {
			return 0, err
		}
		if n < 8 || n > maxHashBytes {
			return 0, fmt.Errorf("hash digest of %d bytes, want 8 to %d", n, maxHashBytes)
		}
		b, err := d.bytes(n)
		if err != nil {
			return 0, err
		}
		return binary.BigEndian.Uint64(b[n-8:]), nil
	}
	v, next, err := readInt(d.payload, d.pos())
	if err != nil {
		return 0, fmt.Errorf("hash: %v", err)
	}
	d.advance(next)
	return uint64(v), nil // negative: its bit pattern
}

func (d *Decoder) tokenList() ([]uint32, error) {
	if isNil, err := d.isNil(); err != nil || isNil {
		return nil, err
	}
	n, err := d.length(d.dec.DecodeArrayLen())
	if err != nil {
		return nil, err
	}
	// The hot loop of the decoder: read the integers straight from the
	// payload.
	start, p, i := len(d.tokens), d.payload, d.pos()
	for range n {
		v, next, err := readInt(p, i)
		if err != nil {
			return nil, fmt.Errorf("token id: %v", err)
		}
		if v < 0 || v > 1<<32-1 {
			return nil, fmt.Errorf("token id %d out of range", v)
		}
		d.tokens = append(d.tokens, uint32(v))
		i = next
	}
	d.advance(i)
	return d.tokens[start:len(d.tokens):len(d.tokens)], nil
}

// readInt reads the msgpack integer at p[i:] and returns it with the offset
// after it. Unsigned 64-bit values above MaxInt64 come back negative.
func readInt(p []byte, i int) (v int64, next int, err error) {
	if i >= len(p) {
		return 0, 0, errors.New("truncated")
	}
	c := p[i]
	if c <= msgpcode.PosFixedNumHigh || c >= msgpcode.NegFixedNumLow {
		return int64(int8(c)), i + 1, nil
	}
	var size int
	switch c {
	case msgpcode.Uint8, msgpcode.Int8:
		size = 1
	case msgpcode.Uint16, msgpcode.Int16:
		size = 2
	case msgpcode.Uint32, msgpcode.Int32:
		size = 4
	case msgpcode.Uint64, msgpcode.Int64:
		size = 8
	default:
		return 0, 0, fmt.Errorf("msgpack code %#x, want an integer", c)
	}
	if len(p)-i-1 < size {
		return 0, 0, errors.New("truncated")
	}
	b := p[i+1 : i+1+size]
	switch c {
	case msgpcode.Uint8:
		v = int64(b[0])
	case msgpcode.Int8:
		v = int64(int8(b[0]))
	case msgpcode.Uint16:
		v = int64(binary.BigEndian.Uint16(b))
	case msgpcode.Int16:
		v = int64(int16(binary.BigEndian.Uint16(b)))
	case msgpcode.Uint32:
		v = int64(binary.BigEndian.Uint32(b))
	case msgpcode.Int32:
		v = int64(int32(binary.BigEndian.Uint32(b)))
	default:
		v = int64(binary.BigEndian.Uint64(b))
	}
	return v, i + 1 + size, nil
}

// pos is the offset of the next byte to decode.
func (d *Decoder) pos() int { return len(d.payload) - d.rd.Len() }

// advance moves the reader to offset i of the payload.
func (d *Decoder) advance(i int) { d.rd.Seek(int64(i), io.SeekStart) } //nolint:errcheck // in bounds

func (d *Decoder) float() (float64, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	if c != msgpcode.Float && c != msgpcode.Double && !isInt(c) {
		return 0, fmt.Errorf("msgpack code %#x, want a number", c)
	}
	return d.dec.DecodeFloat64()
}

// optInt reads an integer or nil.
func (d *Decoder) optInt() (int64, bool, error) {
	c, err := d.peek()
	if err != nil {
		return 0, false, err
	}
	if c == msgpcode.Nil {
		d.rd.ReadByte() //nolint:errcheck // peeked
		return 0, false, nil
	}
	if !isInt(c) {
		return 0, false, fmt.Errorf("msgpack code %#x, want an integer", c)
	}
	v, err := d.dec.DecodeInt64()
	return v, err == nil, err
}

// optStr reads a string or nil.
func (d *Decoder) optStr() (string, bool, error) {
	if isNil, err := d.isNil(); err != nil || isNil {
		return "", false, err
	}
	s, err := d.str()
	return s, err == nil, err
}

// str reads a string, interning it: media, tags and LoRA names repeat.
func (d *Decoder) str() (string, error) {
	c, err := d.peek()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(c) && !msgpcode.IsBin(c) {
		return "", fmt.Errorf("msgpack code %#x, want a string", c)
	}
	n, err := d.dec.DecodeBytesLen()
	if err != nil {
		return "", err
	}
	b, err := d.bytes(n)
	if err != nil {
		return "", err
	}
	if n > 256 {
		return string(b), nil
	}
	if s, ok := d.strs[string(b)]; ok {
		return s, nil
	}
	if d.strs == nil || len(d.strs) >= 4096 {
		d.strs = map[string]string{}
	}
	s := string(b)
	d.strs[s] = s
	return s, nil
}

// key reads a map key, which must be a string.
func (d *Decoder) key() (string, error) {
	s, err := d.str()
	if err != nil {
		return "", fmt.Errorf("map key: %v", err)
	}
	return s, nil
}

// bytes consumes the next n bytes of the payload and returns them (not a
// copy).
func (d *Decoder) bytes(n int) ([]byte, error) {
	if n < 0 || n > d.rd.Len() {
		return nil, errors.New("truncated string or bytes")
	}
	start := d.pos()
	d.advance(start + n)
	return d.payload[start : start+n], nil
}

func (d *Decoder) skipN(n int) error {
	for range n {
		if err := d.skip(0); err != nil {
			return err
		}
	}
	return nil
}

// skip skips one value, refusing nesting deeper than maxDepth (a recursive
// skip of hostile input must not exhaust the stack).
func (d *Decoder) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.length(d.dec.DecodeArrayLen())
		if err != nil {
			return err
		}
		for range n {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.length(d.dec.DecodeMapLen())
		if err != nil {
			return err
		}
		for range 2 * n {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	}
	if msgpcode.IsString(c) || msgpcode.IsBin(c) {
		n, err := d.dec.DecodeBytesLen()
		if err != nil {
			return err
		}
		_, err = d.bytes(n)
		return err
	}
	if msgpcode.IsExt(c) {
		// Bounds-checked here: msgpack's Skip reads the claimed length into
		// its own buffer, which a hostile claim grows by 1 MiB a message.
		_, n, err := d.dec.DecodeExtHeader()
		if err != nil {
			return err
		}
		_, err = d.bytes(n)
		return err
	}
	// Other scalars: msgpack's Skip reads at most 8 bytes for these.
	return d.dec.Skip()
}

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)
}

func msgpackDecoder() *msgpack.Decoder { return msgpack.NewDecoder(nil) }

func isString(c byte) bool { return msgpcode.IsString(c) }
