package prefix

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/redisindex"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/internal/indexbackend"
	"github.com/eppkit/eppkit/scheduling"
)

// MinBlockTokens is the floor on tokens per index block: smaller blocks cost
// index memory and hashing time without improving routing.
const MinBlockTokens = 64

// Approx is the approx-prefix-cache-producer plugin.
type Approx struct {
	BlockSizeTokens        int                      `json:"blockSizeTokens" doc:"tokens per block before the floor of 64 (auto-tuned from the engine's block size when autoTune is on)"`
	MaxPrefixBlocksToMatch int                      `json:"maxPrefixBlocksToMatch" doc:"blocks hashed and matched at most"`
	MaxPrefixTokensToMatch int                      `json:"maxPrefixTokensToMatch" doc:"tokens matched at most (0 = no limit beyond maxPrefixBlocksToMatch)"`
	LRUCapacityPerServer   int                      `json:"lruCapacityPerServer" doc:"index blocks each endpoint may hold when its engine does not report its KV-cache size"`
	AutoTune               bool                     `json:"autoTune" doc:"use the engine's reported block size and GPU block count"`
	IndexBackend           string                   `json:"indexBackend" doc:"memory (each replica its own index) or redis (one index every replica shares)"`
	Redis                  indexbackend.RedisParams `json:"redis" doc:"the shared index's server, for indexBackend redis"`

	once    sync.Once
	name    string
	key     plugins.Key[*scheduling.PrefixMatch]
	prepKey plugins.Key[*prepared]
	store   kvindex.PrefixStore
	index   *kvindex.PrefixIndex    // indexBackend memory
	shared  *redisindex.PrefixIndex // indexBackend redis
	caps    sync.Map                // endpoint host:port → capacity last set
	removed sync.Map                // host:port of endpoints that left the pool → struct{}
	// engineBlock is the last engine block size seen (auto-tune).
	engineBlock atomic.Int64
}

var (
	_ requestcontrol.DataProducer = (*Approx)(nil)
	_ requestcontrol.PreRequest   = (*Approx)(nil)
	_ requestcontrol.Preparer     = (*Approx)(nil)
	_ datalayer.EndpointListener  = (*Approx)(nil)
	_ plugins.Closer              = (*Approx)(nil)
)

// SetDefaults sets the SPEC §5.1 defaults.
func (p *Approx) SetDefaults() {
	p.BlockSizeTokens = 16
	p.MaxPrefixBlocksToMatch = kvindex.DefaultMaxBlocks
	p.LRUCapacityPerServer = kvindex.DefaultCapacity
	p.AutoTune = true
	p.IndexBackend = indexbackend.Memory
	p.Redis.SetDefaults()
}

// Validate rejects non-positive sizes and checks the index backend.
func (p *Approx) Validate() error {
	var errs []error
	if p.BlockSizeTokens <= 0 {
		errs = append(errs, errors.New("blockSizeTokens: must be > 0"))
	}
	if p.MaxPrefixBlocksToMatch <= 0 {
		errs = append(errs, errors.New("maxPrefixBlocksToMatch: must be > 0"))
	}
	if p.MaxPrefixTokensToMatch < 0 {
		errs = append(errs, errors.New("maxPrefixTokensToMatch: must be ≥ 0"))
	}
	if p.LRUCapacityPerServer <= 0 {
		errs = append(errs, errors.New("lruCapacityPerServer: must be > 0"))
	}
	errs = append(errs, indexbackend.Validate(p.IndexBackend, &p.Redis)...)
	return errors.Join(errs...)
}

// Init creates the index and the data key named after the instance. With
// indexBackend redis it sets up the shared index, which connects lazily: a
// server that is down at startup only means no prefix data until it is up.
func (p *Approx) Init(_ context.Context, deps plugins.Deps) error {
	p.name = deps.Name
	if p.IndexBackend == indexbackend.Redis {
		deps = deps.WithDefaults()
		cfg, err := p.Redis.Config(deps.Logger.With("plugin", p.name))
		if err != nil {
			return err
		}
		shared, err := redisindex.NewPrefixIndex(cfg, kvindex.PrefixIndexConfig{DefaultCapacity: p.LRUCapacityPerServer})
		if err != nil {
			return err
		}
		p.shared, p.store = shared, shared
	}
	p.ready()
	return nil
}

// Close stops the shared index's writer, after writing what it has queued,
// and closes its connections; the memory backend has nothing to close.
func (p *Approx) Close() error {
	if p.shared != nil {
		return p.shared.Close()
	}
	return nil
}

// Flush waits until the credits queued for the shared index are written;
// the memory backend writes at once.
func (p *Approx) Flush(ctx context.Context) error {
	if p.shared != nil {
		return p.shared.Flush(ctx)
	}
	return nil
}

// BackendStats counts the shared index's calls to its server (the error
// metric of indexBackend redis); the zero value for the memory backend.
func (p *Approx) BackendStats() kvindex.BackendStats {
	if p.shared != nil {
		return p.shared.BackendStats()
	}
	return kvindex.BackendStats{}
}

// ready sets the producer up once: on Init, or on first use for a value
// built in Go without the registry.
func (p *Approx) ready() {
	p.once.Do(func() {
		if p.MaxPrefixBlocksToMatch == 0 {
			p.SetDefaults()
		}
		if p.name == "" {
			p.name = scheduling.DefaultPrefixProducer
		}
		p.key = scheduling.PrefixMatchKey(p.name)
		p.prepKey = plugins.NewKey[*prepared](p.name + "/prepared")
		if p.store == nil && p.IndexBackend != indexbackend.Redis {
			p.index = kvindex.NewPrefixIndex(kvindex.PrefixIndexConfig{DefaultCapacity: p.LRUCapacityPerServer})
			p.store = p.index
		}
	})
}

// Index returns the producer's in-memory prefix index (for tests, the CLI's
// --history and the simulator); nil with indexBackend redis.
func (p *Approx) Index() *kvindex.PrefixIndex {
	p.ready()
	return p.index
}

// Produces returns the PrefixMatch key named after the instance.
func (p *Approx) Produces() []plugins.AnyKey {
	p.ready()
	return []plugins.AnyKey{p.key}
}

// BlockTokens returns the tokens per block in use: the engine's block size
// when auto-tuning and known, else blockSizeTokens, floored to MinBlockTokens.
func (p *Approx) BlockTokens() int {
	bt := p.BlockSizeTokens
	if eb := int(p.engineBlock.Load()); p.AutoTune && eb > 0 {
		bt = eb
	}
	return max(bt, MinBlockTokens)
}

func (p *Approx) maxBlocks(bt int) int {
	mb := p.MaxPrefixBlocksToMatch
	if p.MaxPrefixTokensToMatch > 0 {
		mb = min(mb, (p.MaxPrefixTokensToMatch+bt-1)/bt)
	}
	return mb
}

type scratch struct {
	hasher  kvindex.ChainHasher
	names   []string
	matched []int
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Produce hashes the request's prompt and matches it against the index.
// When the shared index does not answer in time it writes no data (the
// scorers score 0) and returns nil: the index counts and logs its errors,
// at most once per ten seconds, and the request goes on.
func (p *Approx) Produce(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) error {
	p.ready()
	if p.store == nil {
		return errors.New("approx-prefix-cache-producer: indexBackend redis needs Init")
	}
	if p.AutoTune {
		for _, e := range eps {
			if bs := e.Metrics.BlockSize; bs > 0 {
				if int64(bs) != p.engineBlock.Load() {
					p.engineBlock.Store(int64(bs))
				}
				break
			}
		}
	}
	bt := p.BlockTokens()
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)

	m := &scheduling.PrefixMatch{BlockTokens: bt, Endpoints: eps}
	if pr, ok := plugins.Get(&req.Data, p.prepKey); ok && pr.fits(req, bt, p.maxBlocks(bt)) {
		m.Blocks = pr.hashes
	} else {
		m.Blocks = HashRequest(&sc.hasher, nil, req, bt, p.maxBlocks(bt))
	}
	m.TotalBlocks = len(m.Blocks)
	m.Matched = make([]float64, len(eps))
	if m.TotalBlocks > 0 {
		sc.names = sc.names[:0]
		for _, e := range eps {
			sc.names = append(sc.names, e.HostPort())
		}
		sc.matched = append(sc.matched[:0], make([]int, len(eps))...)
		err := p.store.MatchContext(ctx, m.Blocks, sc.names, sc.matched)
		clear(sc.names) // do not pin endpoint strings in the pool
		if err != nil {
			return nil // no prefix data for this request
		}
		for i, n := range sc.matched {
			m.Matched[i] = float64(n)
		}
	}
	plugins.Set(&req.Data, p.key, m)
	return nil
}

// prepared are a request's block hashes computed by Prepare, with what
// they depend on besides the body.
type prepared struct {
	model      string
	bt, blocks int
	hashes     []uint64
}

func (pr *prepared) fits(req *scheduling.Request, bt, maxBlocks int) bool {
	return pr.model == req.TargetModel && pr.bt == bt && pr.blocks == maxBlocks
}

// Prepare hashes the prompt in the parse stage (requestcontrol.Preparer)
// with the block size in use; Produce uses the hashes unless the block size
// or the target model changed in between.
func (p *Approx) Prepare(_ context.Context, req *scheduling.Request) {
	p.ready()
	bt := p.BlockTokens()
	mb := p.maxBlocks(bt)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	plugins.Set(&req.Data, p.prepKey, &prepared{model: req.TargetModel, bt: bt, blocks: mb,
		hashes: HashRequest(&sc.hasher, nil, req, bt, mb)})
}

// HashRequest appends the chained block hashes of req's prompt to dst: the
// request's token ids when it carries them, otherwise the byte stream of
// SPEC §5.1 (tools, system, each message's role then its text and the
// references of its media parts, the prompt), rooted at the target model and
// the cache salt.
func HashRequest(h *kvindex.ChainHasher, dst []uint64, req *scheduling.Request, blockTokens, maxBlocks int) []uint64 {
	b := req.Body
	if b == nil {
		return dst
	}
	model := req.TargetModel
	if model == "" {
		model = b.Model
	}
	h.Reset(model, b.CacheSalt, blockTokens, maxBlocks)
	if len(b.TokenIDs) > 0 {
		h.WriteTokens(b.TokenIDs)
		return h.AppendSum(dst)
	}
	h.Write(b.Tools)
	h.WriteString(b.System)
	for i := range b.Messages {
		if h.Full() {
			break
		}
		h.WriteString(b.Messages[i].Role)
		h.WriteString(b.Messages[i].Content)
		for _, m := range b.Messages[i].Media { // images etc. change the cache content
			h.WriteString(m.Type)
			h.WriteString(m.Ref)
		}
	}
	h.WriteString(b.Prompt)
	return h.AppendSum(dst)
}

// PreRequest credits the primary pick and a prefill profile's pick with the
// request's blocks: the engines will hold them once they serve it.
func (p *Approx) PreRequest(_ context.Context, req *scheduling.Request, res *scheduling.Result) {
	p.ready()
	m, ok := plugins.Get(&req.Data, p.key)
	if !ok || len(m.Blocks) == 0 {
		return
	}
	for _, pr := range res.Profiles {
		if len(pr.Endpoints) == 0 || (pr.Profile != res.Primary && pr.Profile != "prefill") {
			continue
		}
		e := pr.Endpoints[0]
		if _, gone := p.removed.Load(e.HostPort()); gone {
			continue // it left the pool while the request was in flight
		}
		p.tuneCapacity(e, m.BlockTokens)
		p.store.Add(e.HostPort(), m.Blocks)
	}
}

// tuneCapacity sets e's capacity from its engine's KV-cache size when known.
func (p *Approx) tuneCapacity(e *scheduling.Endpoint, blockTokens int) {
	c := p.LRUCapacityPerServer
	if p.AutoTune {
		if ec := kvindex.CapacityFromEngine(e.Metrics.BlockSize, e.Metrics.GPUBlocks, blockTokens); ec > 0 {
			c = ec
		}
	}
	if prev, ok := p.caps.Load(e.HostPort()); ok && prev.(int) == c {
		return
	}
	p.caps.Store(e.HostPort(), c)
	p.store.SetCapacity(e.HostPort(), c)
}

// EndpointAdded lets a returning endpoint be credited again; it starts with
// no blocks.
func (p *Approx) EndpointAdded(e *datalayer.Endpoint) { p.removed.Delete(e.HostPort()) }

// EndpointRemoved forgets everything the endpoint held.
func (p *Approx) EndpointRemoved(e *datalayer.Endpoint) {
	p.ready()
	p.removed.Store(e.HostPort(), struct{}{})
	p.caps.Delete(e.HostPort())
	if p.store != nil {
		p.store.RemoveEndpoint(e.HostPort())
	}
}
