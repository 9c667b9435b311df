package sim

import (
	"time"
)

// ServerParams describe one simulated model server. The defaults
// (DefaultServerParams) stand for an 8B model (Llama-3-8B-like: 128 KiB of
// fp16 KV cache per token) served by vLLM on one H100-class GPU.
type ServerParams struct {
	// BlockTokens is the KV-cache block size in tokens (vLLM: 16).
	BlockTokens int
	// KVBlocks is the number of KV-cache blocks (28,000 × 16 tokens ≈
	// 450k tokens ≈ 56 GiB of KV cache).
	KVBlocks int
	// MaxBatchedTokens is the token budget of one engine step (prefill
	// chunks plus one token per decoding sequence; vLLM: 8,192).
	MaxBatchedTokens int
	// MaxSeqs is the most sequences running at once (vLLM: 256).
	MaxSeqs int
	// StepOverhead is the fixed cost of one engine step.
	StepOverhead time.Duration
	// PrefillPerToken is the cost of each uncached prompt token computed
	// (50µs: 20k prefill tokens/s).
	PrefillPerToken time.Duration
	// DecodePerSeq is the cost each decoding sequence adds to a step.
	DecodePerSeq time.Duration
	// MaxLoRAs is the number of LoRA adapter slots; LoRALoad the delay of
	// loading one into a slot (it stalls the step that loads it).
	MaxLoRAs int
	LoRALoad time.Duration
}

// DefaultServerParams returns the defaults: an 8B model on one H100-class
// GPU under vLLM.
func DefaultServerParams() ServerParams {
	return ServerParams{
		BlockTokens:      16,
		KVBlocks:         28000,
		MaxBatchedTokens: 8192,
		MaxSeqs:          256,
		StepOverhead:     4 * time.Millisecond,
		PrefillPerToken:  50 * time.Microsecond,
		DecodePerSeq:     150 * time.Microsecond,
		MaxLoRAs:         4,
		LoRALoad:         30 * time.Millisecond,
	}
}

func (p *ServerParams) defaults() {
	d := DefaultServerParams()
	if p.BlockTokens <= 0 {
		p.BlockTokens = d.BlockTokens
	}
	if p.KVBlocks <= 0 {
		p.KVBlocks = d.KVBlocks
	}
	if p.MaxBatchedTokens <= 0 {
		p.MaxBatchedTokens = d.MaxBatchedTokens
	}
	if p.MaxSeqs <= 0 {
		p.MaxSeqs = d.MaxSeqs
	}
	if p.StepOverhead <= 0 {
		p.StepOverhead = d.StepOverhead
	}
	if p.PrefillPerToken <= 0 {
		p.PrefillPerToken = d.PrefillPerToken
	}
	if p.DecodePerSeq <= 0 {
		p.DecodePerSeq = d.DecodePerSeq
	}
	if p.MaxLoRAs <= 0 {
		p.MaxLoRAs = d.MaxLoRAs
	}
	if p.LoRALoad <= 0 {
		p.LoRALoad = d.LoRALoad
	}
}

// seq is a request on a server.
type seq struct {
	req    *Request
	user   any // the simulator's handle (the Exchange)
	hashes []uint64
	// blocks are the KV blocks the sequence holds while it runs; while it
	// waits, the blocks its last admission attempt matched (not held).
	blocks []int32

	target    int // tokens to prefill: the prompt, plus output on recompute
	prefilled int
	chunk     int // prefill tokens scheduled in the current step
	generated int
	cached    int // prompt tokens found cached at first admission
	hit       int // prompt blocks taken from the cache at the last admission
	admitted  bool
	lora      bool // holds a LoRA slot reference

	arrival, admittedAt, firstToken, done time.Duration
}

// server is a vLLM-like engine: a FCFS waiting queue, a running batch
// advanced one step at a time, a paged KV cache with prefix caching and LoRA
// slots.
type server struct {
	p       ServerParams
	base    string // base model name
	kv      *kvCache
	waiting []*seq // FIFO; waiting[wHead:] are live
	wHead   int
	running []*seq

	loras []loraSlot // loaded adapters, least recently used first

	busy bool
	// Events, when set, receives the KV events of each step: the blocks
	// stored (with their tokens) and removed, as vLLM publishes them.
	events *kvEvents
	// finished receives the sequences that ended in the last step.
	finished []*seq
}

type loraSlot struct {
	name  string
	inUse int
}

func newServer(p ServerParams, base string) *server {
	p.defaults()
	return &server{p: p, base: base, kv: newKVCache(p.KVBlocks)}
}

func (s *server) queued() int { return len(s.waiting) - s.wHead }

// enqueue adds a request to the waiting queue.
func (s *server) enqueue(q *seq) {
	q.target = q.req.PromptTokens
	q.blocks = make([]int32, 0, s.blocksFor(q.req.PromptTokens+q.req.OutputTokens))
	s.waiting = append(s.waiting, q)
}

// blockHashes computes the chained hashes of the request's full prompt
// blocks of blockTokens tokens (the root folds in the model name, as the
// engine does per LoRA).
func blockHashes(r *Request, blockTokens int) []uint64 {
	n := min(r.PromptTokens/blockTokens, len(r.Units))
	h := make([]uint64, n)
	prev := strHash(r.Model)
	for i := range n {
		prev = mix(prev ^ mix(r.Units[i]+0x9e3779b97f4a7c15))
		h[i] = prev
	}
	return h
}

func (s *server) blocksFor(tokens int) int {
	return (tokens + s.p.BlockTokens - 1) / s.p.BlockTokens
}

// startStep plans the next engine step at now and returns its duration;
// ok is false when there is nothing to do.
func (s *server) startStep(now time.Duration) (time.Duration, bool) {
	budget := s.p.MaxBatchedTokens
	prefillTokens, decodes := 0, 0
	var extra time.Duration
	// Running sequences: decode one token each, or continue a chunked
	// prefill. A decode that needs a new block and finds none preempts the
	// most recently admitted sequence (recompute, as vLLM does).
	for i := 0; i < len(s.running); i++ {
		q := s.running[i]
		q.chunk = 0
		if q.prefilled < q.target {
			c := min(q.target-q.prefilled, budget)
			q.chunk = c
			budget -= c
			prefillTokens += c
			continue
		}
		if budget <= 0 {
			continue
		}
		need := s.blocksFor(q.req.PromptTokens+q.generated+1) - len(q.blocks)
		for need > 0 {
			var ok bool
			q.blocks, ok = s.kv.alloc(q.blocks, need)
			if ok {
				break
			}
			victim := s.running[len(s.running)-1]
			s.preempt(victim)
			if victim == q {
				break
			}
		}
		if i >= len(s.running) || s.running[i] != q {
			break // q itself was preempted
		}
		budget--
		decodes++
		q.chunk = -1 // decoding
	}
	// Admit waiting sequences in order while the budget, the sequence limit
	// and the KV cache allow.
	skipped := 0
	for s.queued() > skipped && budget > 0 && len(s.running) < s.p.MaxSeqs {
		idx := s.wHead + skipped
		q := s.waiting[idx]
		if q.req.Model != s.base && !q.lora {
			d, ok := s.loadLoRA(q.req.Model)
			if !ok {
				if skipped++; skipped >= 8 {
					break
				}
				continue
			}
			q.lora = true
			extra += d
		}
		if q.hashes == nil {
			q.hashes = blockHashes(q.req, s.p.BlockTokens)
		}
		q.blocks = s.kv.match(q.blocks, q.hashes)
		hit := len(q.blocks)
		// Always compute at least the last prompt token.
		if hit*s.p.BlockTokens >= q.target {
			hit = (q.target - 1) / s.p.BlockTokens
		}
		need := s.blocksFor(q.target) - hit
		if need > s.kv.nfree {
			break // head-of-line: wait for blocks (q.blocks: matched, not held)
		}
		q.blocks = q.blocks[:hit]
		s.kv.acquire(q.blocks)
		q.blocks, _ = s.kv.alloc(q.blocks, need)
		if !q.admitted {
			q.admitted = true
			q.admittedAt = now
			q.cached = hit * s.p.BlockTokens
		}
		q.prefilled = hit * s.p.BlockTokens
		q.hit = hit
		c := min(q.target-q.prefilled, budget)
		q.chunk = c
		budget -= c
		prefillTokens += c
		// remove from the waiting queue
		if skipped == 0 {
			s.waiting[s.wHead] = nil
			s.wHead++
		} else {
			copy(s.waiting[idx:], s.waiting[idx+1:])
			s.waiting[len(s.waiting)-1] = nil
			s.waiting = s.waiting[:len(s.waiting)-1]
		}
		s.running = append(s.running, q)
	}
	if s.wHead > 1024 && s.wHead*2 > len(s.waiting) {
		n := copy(s.waiting, s.waiting[s.wHead:])
		clear(s.waiting[n:])
		s.waiting = s.waiting[:n]
		s.wHead = 0
	}
	if prefillTokens == 0 && decodes == 0 {
		return 0, false
	}
	d := s.p.StepOverhead + time.Duration(prefillTokens)*s.p.PrefillPerToken +
		time.Duration(decodes)*s.p.DecodePerSeq + extra
	return d, true
}

// finishStep applies the step that ends at now: prefills complete (the
// first token is produced by the step that completes the prefill), decodes
// advance, finished sequences release their blocks. The finished ones are
// left in s.finished.
func (s *server) finishStep(now time.Duration) {
	s.finished = s.finished[:0]
	keep := s.running[:0]
	for _, q := range s.running {
		switch {
		case q.chunk > 0:
			q.prefilled += q.chunk
			if q.prefilled >= q.target {
				// The prompt's full blocks are now computed: cache those not
				// taken from the cache.
				unique := len(q.req.Units) - q.req.Unique
				for i := q.hit; i < len(q.hashes) && i < len(q.blocks); i++ {
					if i >= unique {
						s.kv.registerPrivate(q.blocks[i], q.hashes[i])
					} else if !s.kv.register(q.blocks[i], parentOf(q.blocks, i), q.hashes[i]) {
						continue
					}
					if s.events != nil {
						s.events.stored(q, i, s.p.BlockTokens)
					}
				}
				if q.generated == 0 {
					q.firstToken = now
				}
				q.generated++
			}
		case q.chunk < 0:
			q.generated++
		}
		q.chunk = 0
		if q.generated >= q.req.OutputTokens && q.prefilled >= q.target {
			q.done = now
			s.cacheOutput(q)
			s.release(q)
			s.finished = append(s.finished, q)
			continue
		}
		keep = append(keep, q)
	}
	clear(s.running[len(keep):])
	s.running = keep
}

// cacheOutput caches the full blocks of q's answer (Request.OutputUnits)
// under the chained hashes a later prompt repeating it will have.
func (s *server) cacheOutput(q *seq) {
	r, bt := q.req, s.p.BlockTokens
	n := r.PromptTokens / bt
	if len(r.OutputUnits) == 0 || r.PromptTokens%bt != 0 || len(q.hashes) != n {
		return
	}
	prev, parent := strHash(r.Model), false
	if n > 0 {
		prev, parent = q.hashes[n-1], true
	}
	for j, u := range r.OutputUnits[:min(len(r.OutputUnits), q.generated/bt)] {
		if n+j >= len(q.blocks) {
			break
		}
		h := mix(prev ^ mix(u+0x9e3779b97f4a7c15))
		if s.kv.register(q.blocks[n+j], parentOf(q.blocks, n+j), h) && s.events != nil {
			s.events.storedBlock(r.Model, h, prev, parent, u, bt)
		}
		prev, parent = h, true
	}
}

// parentOf returns the block before blocks[i], or -1.
func parentOf(blocks []int32, i int) int32 {
	if i == 0 {
		return -1
	}
	return blocks[i-1]
}

func (s *server) release(q *seq) {
	s.kv.release(q.blocks)
	q.blocks = q.blocks[:0]
	if q.lora {
		for i := range s.loras {
			if s.loras[i].name == q.req.Model {
				s.loras[i].inUse--
			}
		}
		q.lora = false
	}
}

// preempt moves a running sequence back to the head of the waiting queue;
// it will recompute its prompt and the tokens it generated.
func (s *server) preempt(q *seq) {
	for i, r := range s.running {
		if r == q {
			copy(s.running[i:], s.running[i+1:])
			s.running[len(s.running)-1] = nil
			s.running = s.running[:len(s.running)-1]
			break
		}
	}
	s.kv.unprivate(q.blocks) // its recompute may hit its own blocks
	s.release(q)
	q.target = q.req.PromptTokens + q.generated
	q.prefilled, q.chunk = 0, 0
	if s.wHead > 0 {
		s.wHead--
		s.waiting[s.wHead] = q
	} else {
		s.waiting = append(s.waiting, nil)
		copy(s.waiting[1:], s.waiting)
		s.waiting[0] = q
	}
}

// loadLoRA takes a reference on adapter name's slot, loading it (into a free
// slot, or over the least recently used idle one) when needed; it returns
// the load delay, or ok false when every slot is busy with another adapter.
func (s *server) loadLoRA(name string) (time.Duration, bool) {
	for i, l := range s.loras {
		if l.name == name {
			l.inUse++
			s.loras = append(append(s.loras[:i:i], s.loras[i+1:]...), l)
			return 0, true
		}
	}
	if len(s.loras) < s.p.MaxLoRAs {
		s.loras = append(s.loras, loraSlot{name: name, inUse: 1})
		return s.p.LoRALoad, true
	}
	for i, l := range s.loras {
		if l.inUse == 0 {
			s.loras = append(append(s.loras[:i:i], s.loras[i+1:]...), loraSlot{name: name, inUse: 1})
			return s.p.LoRALoad, true
		}
	}
	return 0, false
}

// loraNames returns the loaded adapters and the adapters waiting requests
// need (at most a few).
func (s *server) loraNames() (active, waiting []string) {
	for _, l := range s.loras {
		active = append(active, l.name)
	}
	for i := s.wHead; i < len(s.waiting) && len(waiting) < 4; i++ {
		m := s.waiting[i].req.Model
		if m == s.base {
			continue
		}
		found := false
		for _, a := range active {
			found = found || a == m
		}
		for _, w := range waiting {
			found = found || w == m
		}
		if !found {
			waiting = append(waiting, m)
		}
	}
	return active, waiting
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// strHash is FNV-1a of s.
func strHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
