package fakeserver

import (
	"container/list"
	"context"
	"encoding/binary"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// engine is the simulated model server: a continuous batch of MaxRunning
// slots with a queue in front, a paged KV cache with prefix caching and LRU
// eviction, and LoRA adapter slots. Every method is safe for concurrent use.
type engine struct {
	cfg   Config
	slots chan struct{} // one token per running request

	mu       sync.Mutex // guards the fields below
	waiting  int
	running  int
	cache    map[uint64]*list.Element // engine block hash → element of lru (value: uint64 hash)
	lru      *list.List               // front: most recently used
	pinned   int                      // blocks held by running requests
	adapters map[string]*adapter
	useSeq   uint64
	events   []event // pending KV events, taken by the publisher

	notify   chan struct{} // a KV event is pending (capacity 1)
	requests atomic.Uint64
	queries  atomic.Uint64 // prompt tokens looked up in the prefix cache
	hits     atomic.Uint64 // of which were cached
}

type adapter struct {
	running, waiting int
	lastUsed         uint64
}

func newEngine(cfg Config) *engine {
	return &engine{
		cfg:      cfg,
		slots:    make(chan struct{}, cfg.MaxRunning),
		cache:    map[uint64]*list.Element{},
		lru:      list.New(),
		adapters: map[string]*adapter{},
		notify:   make(chan struct{}, 1),
	}
}

// job is one admitted request holding a running slot.
type job struct {
	e       *engine
	lora    string
	blocks  int // pinned
	cached  int // prompt tokens found in the prefix cache
	release sync.Once
}

// admit queues the request until a running slot frees or ctx is done.
func (e *engine) admit(ctx context.Context, model string) (*job, error) {
	e.requests.Add(1)
	lora := ""
	if model != e.cfg.Model {
		lora = model
	}
	e.mu.Lock()
	e.waiting++
	a := e.adapter(lora)
	if a != nil {
		a.waiting++
	}
	e.mu.Unlock()
	var err error
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		err = ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.waiting--
	if a != nil {
		a.waiting--
	}
	if err != nil {
		return nil, err
	}
	e.running++
	if a != nil {
		a.running++
		e.useSeq++
		a.lastUsed = e.useSeq
	}
	return &job{e: e, lora: lora}, nil
}

// adapter returns the adapter called name, loading it into a slot (evicting
// the least recently used idle adapter when the slots are full); nil for the
// base model. Called with mu held.
func (e *engine) adapter(name string) *adapter {
	if name == "" {
		return nil
	}
	if a, ok := e.adapters[name]; ok {
		return a
	}
	if len(e.adapters) >= e.cfg.MaxLoRAs {
		victim, oldest := "", uint64(0)
		for n, a := range e.adapters {
			if a.running == 0 && a.waiting == 0 && (victim == "" || a.lastUsed < oldest) {
				victim, oldest = n, a.lastUsed
			}
		}
		if victim != "" {
			delete(e.adapters, victim)
		}
	}
	a := &adapter{}
	e.adapters[name] = a
	return a
}

// prefill looks the prompt's full blocks up in the prefix cache, counts the
// consecutive hits from block 0, stores the missing blocks (publishing
// BlockStored), pins the request's blocks and returns how many prompt tokens
// were cached.
func (j *job) prefill(tokens []uint32, outputTokens int) int {
	e := j.e
	bs := e.cfg.BlockSize
	full := len(tokens) / bs
	hashes := blockHashes(j.lora, tokens[:full*bs], bs)
	e.mu.Lock()
	defer e.mu.Unlock()
	hit := 0
	for hit < len(hashes) {
		if _, ok := e.cache[hashes[hit]]; !ok {
			break
		}
		hit++
	}
	run := -1 // first block of the current run of newly stored blocks
	for i, h := range hashes {
		if el, ok := e.cache[h]; ok {
			e.lru.MoveToFront(el)
			if run >= 0 {
				e.stored(hashes, run, i, tokens, j.lora)
				run = -1
			}
			continue
		}
		e.cache[h] = e.lru.PushFront(h)
		if run < 0 {
			run = i
		}
	}
	if run >= 0 {
		e.stored(hashes, run, len(hashes), tokens, j.lora)
	}
	var removed []uint64
	for e.lru.Len() > e.cfg.KVBlocks {
		el := e.lru.Back()
		h := el.Value.(uint64)
		e.lru.Remove(el)
		delete(e.cache, h)
		removed = append(removed, h)
	}
	if len(removed) > 0 {
		e.push(event{kind: blockRemoved, hashes: removed})
	}
	j.blocks = (len(tokens) + outputTokens + bs - 1) / bs
	e.pinned += j.blocks
	j.cached = hit * bs
	e.queries.Add(uint64(len(tokens)))
	e.hits.Add(uint64(j.cached))
	return j.cached
}

// stored queues a BlockStored event for blocks [from, to) of hashes, whose
// tokens are in tokens. Called with mu held.
func (e *engine) stored(hashes []uint64, from, to int, tokens []uint32, lora string) {
	bs := e.cfg.BlockSize
	ev := event{kind: blockStored, hashes: slices.Clone(hashes[from:to]),
		tokens: slices.Clone(tokens[from*bs : to*bs]), blockSize: bs, lora: lora}
	if from > 0 {
		p := hashes[from-1]
		ev.parent = &p
	}
	e.push(ev)
}

// push queues a KV event for the publisher, when there is one. Called with
// mu held.
func (e *engine) push(ev event) {
	if e.cfg.KVEvents == nil {
		return
	}
	if len(e.events) >= maxPendingEvents {
		e.events = e.events[1:] // the publisher is behind: the oldest goes
	}
	e.events = append(e.events, ev)
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

const maxPendingEvents = 4096

// takeEvents returns and clears the pending KV events.
func (e *engine) takeEvents() []event {
	e.mu.Lock()
	defer e.mu.Unlock()
	evs := e.events
	e.events = nil
	return evs
}

// clearCache drops every cached block (AllBlocksCleared).
func (e *engine) clearCache() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.cache)
	e.lru.Init()
	e.push(event{kind: allCleared})
}

// done releases the job's slot and blocks.
func (j *job) done() {
	j.release.Do(func() {
		e := j.e
		e.mu.Lock()
		e.running--
		e.pinned -= j.blocks
		if a := e.adapters[j.lora]; a != nil && j.lora != "" {
			a.running--
		}
		e.mu.Unlock()
		<-e.slots
	})
}

// blockHashes returns the engine's chained hashes of the full blocks of
// tokens: hᵢ = xxhash64(hᵢ₋₁ ‖ tokens of block i), rooted at the LoRA name.
// Like vLLM's, they are the engine's own: the picker keys blocks by its own
// hash of the token ids the events carry.
func blockHashes(lora string, tokens []uint32, bs int) []uint64 {
	out := make([]uint64, 0, len(tokens)/bs)
	parent := xxhash.Sum64String("fakeserver/" + lora)
	buf := make([]byte, 8+4*bs)
	for i := 0; i+bs <= len(tokens); i += bs {
		binary.LittleEndian.PutUint64(buf, parent)
		for k, t := range tokens[i : i+bs] {
			binary.LittleEndian.PutUint32(buf[8+4*k:], t)
		}
		parent = xxhash.Sum64(buf)
		out = append(out, parent)
	}
	return out
}

// state is a consistent view of the engine for /metrics.
type state struct {
	waiting, running int
	kvUsage          float64
	runningLoRAs     []string
	waitingLoRAs     []string
	cachedBlocks     int
}

func (e *engine) state() state {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := state{waiting: e.waiting, running: e.running, cachedBlocks: e.lru.Len()}
	s.kvUsage = min(1, float64(e.pinned)/float64(e.cfg.KVBlocks))
	for n, a := range e.adapters {
		// A loaded adapter is reported as running (it holds a slot), as the
		// picker's LoRA affinity expects; one with only queued requests and
		// nothing running is also reported waiting.
		s.runningLoRAs = append(s.runningLoRAs, n)
		if a.waiting > 0 && a.running == 0 {
			s.waitingLoRAs = append(s.waitingLoRAs, n)
		}
	}
	sort.Strings(s.runningLoRAs)
	sort.Strings(s.waitingLoRAs)
	return s
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func joinNames(s []string) string { return strings.Join(s, ",") }
