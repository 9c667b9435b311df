package precise

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/redisindex"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/internal/indexbackend"
	"github.com/eppkit/eppkit/scheduling"
)

// TypeName is the plugin type (and default instance name) of Producer.
const TypeName = "precise-prefix-cache-producer"

// Producer is the precise-prefix-cache-producer plugin. The struct is its
// configuration; Init starts the KV-event subscriber and Close stops it.
type Producer struct {
	BlockSizeTokens        int                      `json:"blockSizeTokens" doc:"tokens per block: the engines' KV block size (events of another size are dropped and counted)"`
	HashAlgorithm          string                   `json:"hashAlgorithm" doc:"xxh64 (our own chained keys over token ids; works whatever the engines' hash seed) or sha256_cbor (the engines' own hashes; needs hashSeed)"`
	HashSeed               string                   `json:"hashSeed" doc:"the engines' PYTHONHASHSEED, for hashAlgorithm sha256_cbor"`
	MaxPrefixBlocksToMatch int                      `json:"maxPrefixBlocksToMatch" doc:"blocks looked up at most"`
	KVEventsConfig         KVEventsConfig           `json:"kvEventsConfig" doc:"where the engines' KV events come from"`
	SpeculativeIndexing    bool                     `json:"speculativeIndexing" doc:"credit the picked endpoint with the request's blocks until the engine's events confirm them"`
	SpeculativeTTL         plugins.Duration         `json:"speculativeTTL" doc:"how long a speculative credit lasts"`
	Render                 RenderConfig             `json:"render" doc:"tokenize through the engine's render endpoints when the request carries no token ids"`
	IndexBackend           string                   `json:"indexBackend" doc:"memory (each replica its own index) or redis (one index every replica shares; any of them may follow the events)"`
	Redis                  indexbackend.RedisParams `json:"redis" doc:"the shared index's server, for indexBackend redis"`

	// Tokenizer, set by Go callers, supplies token ids for requests that
	// carry none (before render is tried).
	Tokenizer Tokenizer `json:"-"`

	name   string
	key    plugins.Key[*scheduling.PrefixMatch]
	clock  plugins.Clock
	store  kvindex.EventStore
	index  *kvindex.EventIndex    // indexBackend memory
	shared *redisindex.EventIndex // indexBackend redis
	sub    *kvindex.Subscriber    // nil in mode none
	render *renderClient
	spec   *speculative
	closed sync.Once
}

// KVEventsConfig says how the subscriber receives the engines' events.
type KVEventsConfig struct {
	Mode        string `json:"mode" doc:"connect (to every endpoint's publisher, port socketPort + rank), bind (one socket at zmqEndpoint that the engines connect to) or none (follow no events: read the shared index other replicas write; indexBackend redis only)"`
	ZMQEndpoint string `json:"zmqEndpoint" doc:"the address bind mode listens on"`
	SocketPort  int    `json:"socketPort" doc:"the engines' publisher port in connect mode (rank r uses socketPort + r)"`
	TopicFilter string `json:"topicFilter" doc:"topic prefix subscribed to"`
	ReplayPort  int    `json:"replayPort" doc:"the engines' replay (ROUTER) port to fill sequence gaps from, rank r on replayPort + r; 0 = no replay"`
}

// RenderConfig configures tokenization through the engines' render
// endpoints.
type RenderConfig struct {
	Enabled   bool             `json:"enabled" doc:"ask a candidate engine's /v1/chat/completions/render or /v1/completions/render for the prompt's token ids"`
	Timeout   plugins.Duration `json:"timeout" doc:"bound on one render call"`
	CacheSize int              `json:"cacheSize" doc:"rendered prompts kept (by body)"`
	Scheme    string           `json:"scheme" doc:"http or https"`
}

var (
	_ requestcontrol.DataProducer = (*Producer)(nil)
	_ requestcontrol.PreRequest   = (*Producer)(nil)
	_ datalayer.EndpointListener  = (*Producer)(nil)
	_ plugins.Initializer         = (*Producer)(nil)
	_ plugins.Closer              = (*Producer)(nil)
)

// Default parameters.
const (
	DefaultMaxPrefixBlocks = 8192 // 131,072 tokens of 16-token blocks
	DefaultSpeculativeTTL  = 2 * time.Second
	DefaultRenderTimeout   = 250 * time.Millisecond
	DefaultRenderCacheSize = 4096
)

// SetDefaults sets the defaults of SPEC §5.2.
func (p *Producer) SetDefaults() {
	p.BlockSizeTokens = kvindex.DefaultEventBlockTokens
	p.HashAlgorithm = string(kvindex.HashXXH64)
	p.MaxPrefixBlocksToMatch = DefaultMaxPrefixBlocks
	p.KVEventsConfig = KVEventsConfig{
		Mode:        kvindex.ModeConnect,
		ZMQEndpoint: "tcp://*:5557",
		SocketPort:  kvindex.DefaultEventsPort,
		TopicFilter: kvindex.DefaultTopicFilter,
	}
	p.SpeculativeTTL = plugins.Duration(DefaultSpeculativeTTL)
	p.Render = RenderConfig{
		Timeout:   plugins.Duration(DefaultRenderTimeout),
		CacheSize: DefaultRenderCacheSize,
		Scheme:    "http",
	}
	p.IndexBackend = indexbackend.Memory
	p.Redis.SetDefaults()
}

// ModeNone is the kvEventsConfig mode of a replica that follows no events
// and reads the shared index other replicas write.
const ModeNone = "none"

// Validate checks the parameters.
func (p *Producer) Validate() error {
	var errs []error
	if p.BlockSizeTokens <= 0 {
		errs = append(errs, errors.New("blockSizeTokens: must be > 0"))
	}
	switch kvindex.HashAlgorithm(p.HashAlgorithm) {
	case kvindex.HashXXH64, kvindex.HashSHA256CBOR:
	default:
		errs = append(errs, fmt.Errorf("hashAlgorithm: %q is not xxh64 or sha256_cbor", p.HashAlgorithm))
	}
	if p.MaxPrefixBlocksToMatch <= 0 {
		errs = append(errs, errors.New("maxPrefixBlocksToMatch: must be > 0"))
	}
	k := p.KVEventsConfig
	switch k.Mode {
	case kvindex.ModeConnect:
		if k.SocketPort <= 0 || k.SocketPort > 65535 {
			errs = append(errs, errors.New("kvEventsConfig.socketPort: must be a port number"))
		}
	case kvindex.ModeBind:
		if k.ZMQEndpoint == "" {
			errs = append(errs, errors.New("kvEventsConfig.zmqEndpoint: required in bind mode"))
		}
	case ModeNone:
		if p.IndexBackend != indexbackend.Redis {
			errs = append(errs, errors.New("kvEventsConfig.mode: none needs indexBackend redis (an index nobody writes stays empty)"))
		}
	default:
		errs = append(errs, fmt.Errorf("kvEventsConfig.mode: %q is not connect, bind or none", k.Mode))
	}
	if k.ReplayPort < 0 || k.ReplayPort > 65535 {
		errs = append(errs, errors.New("kvEventsConfig.replayPort: must be 0 or a port number"))
	}
	if p.SpeculativeIndexing && p.SpeculativeTTL <= 0 {
		errs = append(errs, errors.New("speculativeTTL: must be > 0"))
	}
	if p.Render.Enabled {
		if p.Render.Timeout <= 0 {
			errs = append(errs, errors.New("render.timeout: must be > 0"))
		}
		if p.Render.Scheme != "http" && p.Render.Scheme != "https" {
			errs = append(errs, fmt.Errorf("render.scheme: %q is not http or https", p.Render.Scheme))
		}
	}
	if p.Render.CacheSize < 0 {
		errs = append(errs, errors.New("render.cacheSize: must be ≥ 0"))
	}
	errs = append(errs, indexbackend.Validate(p.IndexBackend, &p.Redis)...)
	return errors.Join(errs...)
}

// Init creates the event index — in memory, or the shared one in Redis,
// which connects lazily — and starts the subscriber (in bind mode it binds
// its socket now; in connect mode it connects as endpoints are added; in
// mode none there is none).
func (p *Producer) Init(_ context.Context, deps plugins.Deps) error {
	deps = deps.WithDefaults()
	p.name = deps.Name
	if p.name == "" {
		p.name = TypeName
	}
	p.key = scheduling.PrefixMatchKey(p.name)
	p.clock = deps.Clock
	log := deps.Logger.With("plugin", p.name)
	icfg := kvindex.EventIndexConfig{
		BlockTokens: p.BlockSizeTokens,
		Algorithm:   kvindex.HashAlgorithm(p.HashAlgorithm),
		HashSeed:    p.HashSeed,
	}
	if p.IndexBackend == indexbackend.Redis {
		cfg, err := p.Redis.Config(log)
		if err != nil {
			return err
		}
		if p.shared, err = redisindex.NewEventIndex(cfg, icfg); err != nil {
			return err
		}
		p.store = p.shared
	} else {
		index, err := kvindex.NewEventIndex(icfg)
		if err != nil {
			return err
		}
		p.index, p.store = index, index
	}
	if k := p.KVEventsConfig; k.Mode != ModeNone {
		sub, err := kvindex.NewSubscriber(kvindex.SubscriberConfig{
			Mode:        k.Mode,
			BindAddress: k.ZMQEndpoint,
			Port:        k.SocketPort,
			TopicFilter: k.TopicFilter,
			ReplayPort:  k.ReplayPort,
			Logger:      log,
		}, p.store)
		if err != nil {
			_ = p.closeShared()
			return err
		}
		p.sub = sub
	}
	if p.Render.Enabled {
		p.render = newRenderClient(p.Render)
	}
	if p.SpeculativeIndexing {
		p.spec = newSpeculative(time.Duration(p.SpeculativeTTL))
	}
	return nil
}

// Close stops the subscriber and closes the shared index's connections.
func (p *Producer) Close() error {
	var err error
	p.closed.Do(func() {
		if p.sub != nil {
			err = p.sub.Close()
		}
		err = errors.Join(err, p.closeShared())
	})
	return err
}

func (p *Producer) closeShared() error {
	if p.shared == nil {
		return nil
	}
	return p.shared.Close()
}

// Index returns the producer's in-memory event index (nil before Init, and
// with indexBackend redis).
func (p *Producer) Index() *kvindex.EventIndex { return p.index }

// Store returns the index the producer reads and its subscriber writes:
// the in-memory one or the shared one (nil before Init).
func (p *Producer) Store() kvindex.EventStore { return p.store }

// Flush waits until the shared index's mirror (redis.mirror) has read every
// change the server had when it was called, so that this replica's lookups
// see them; it returns at once otherwise.
func (p *Producer) Flush(ctx context.Context) error {
	if p.shared != nil {
		return p.shared.Flush(ctx)
	}
	return nil
}

// BackendStats counts the shared index's calls to its server (the error
// metric of indexBackend redis); the zero value for the memory backend.
func (p *Producer) BackendStats() kvindex.BackendStats {
	if p.shared != nil {
		return p.shared.BackendStats()
	}
	return kvindex.BackendStats{}
}

// Subscriber returns the producer's subscriber (nil before Init): its Addr
// in bind mode, its Stats.
func (p *Producer) Subscriber() *kvindex.Subscriber { return p.sub }

// Produces returns the PrefixMatch key named after the instance.
func (p *Producer) Produces() []plugins.AnyKey {
	name := p.name
	if name == "" {
		name = TypeName
	}
	return []plugins.AnyKey{scheduling.PrefixMatchKey(name)}
}

// ErrNoTokens is wrapped by Produce's error when a request's token ids are
// not available: the consumers then see no prefix data.
var ErrNoTokens = errors.New("no token ids for the request")

type scratch struct {
	names []string
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Produce looks the request's blocks up and writes the PrefixMatch. Without
// token ids it writes nothing and returns an error wrapping ErrNoTokens that
// says why. When the shared index does not answer in time it writes nothing
// and returns nil: the index counts and logs its errors (at most once per
// ten seconds) and the request goes on without prefix data.
func (p *Producer) Produce(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) error {
	if p.store == nil {
		return errors.New("precise-prefix-cache-producer: used before Init")
	}
	toks, err := p.tokens(ctx, req, eps)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	model := req.TargetModel
	if model == "" {
		model = req.Body.Model
	}
	m := &scheduling.PrefixMatch{BlockTokens: p.store.BlockTokens(), Endpoints: eps, Matched: make([]float64, len(eps))}
	m.Blocks = p.store.BlockKeys(nil, model, req.Body.CacheSalt, toks, p.MaxPrefixBlocksToMatch)
	m.TotalBlocks = len(m.Blocks)
	if m.TotalBlocks > 0 && len(eps) > 0 {
		sc := scratchPool.Get().(*scratch)
		for _, e := range eps {
			sc.names = append(sc.names, e.HostPort())
		}
		err := p.store.MatchContext(ctx, m.Blocks, sc.names, m.Matched)
		if p.spec != nil { // this replica's own recent picks, even when the index failed
			p.spec.match(m.Blocks, sc.names, p.clock.Now(), m.Matched)
		}
		clear(sc.names)
		sc.names = sc.names[:0]
		scratchPool.Put(sc)
		if err != nil && p.spec == nil {
			return nil // no prefix data for this request
		}
	}
	plugins.Set(&req.Data, p.key, m)
	return nil
}

// tokens returns the request's token ids from the first source that has
// them.
func (p *Producer) tokens(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) ([]uint32, error) {
	b := req.Body
	if b == nil {
		return nil, fmt.Errorf("%w: the request has no body", ErrNoTokens)
	}
	if len(b.TokenIDs) > 0 {
		return b.TokenIDs, nil
	}
	model := req.TargetModel
	if model == "" {
		model = b.Model
	}
	var errs []error
	if p.Tokenizer != nil {
		toks, err := p.Tokenizer.Tokenize(ctx, model, b)
		if err == nil {
			return toks, nil
		}
		errs = append(errs, fmt.Errorf("tokenizer: %w", err))
	}
	if p.render != nil {
		toks, err := p.render.tokens(ctx, eps, b)
		if err == nil {
			return toks, nil
		}
		errs = append(errs, fmt.Errorf("render: %w", err))
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: the request carries none, no tokenizer is configured and render is disabled", ErrNoTokens)
	}
	return nil, fmt.Errorf("%w: %w", ErrNoTokens, errors.Join(errs...))
}

// PreRequest credits the primary pick (and a prefill profile's pick) with
// the request's blocks for speculativeTTL, when speculative indexing is on.
func (p *Producer) PreRequest(_ context.Context, req *scheduling.Request, res *scheduling.Result) {
	if p.spec == nil {
		return
	}
	m, ok := plugins.Get(&req.Data, p.key)
	if !ok || len(m.Blocks) == 0 {
		return
	}
	now := p.clock.Now()
	for _, pr := range res.Profiles {
		if len(pr.Endpoints) == 0 || (pr.Profile != res.Primary && pr.Profile != "prefill") {
			continue
		}
		p.spec.add(pr.Endpoints[0].HostPort(), m.Blocks, now)
	}
}

// EndpointAdded starts following the endpoint's KV events.
func (p *Producer) EndpointAdded(e *datalayer.Endpoint) {
	if p.sub == nil {
		return
	}
	p.sub.AddEndpoint(kvindex.SubscriberEndpoint{Name: e.HostPort(), Address: e.Address, Port: e.Port, Rank: e.Rank})
}

// EndpointRemoved stops following the endpoint and forgets its blocks (for
// every replica with indexBackend redis; a replica in mode none leaves that
// to those that follow the events).
func (p *Producer) EndpointRemoved(e *datalayer.Endpoint) {
	if p.spec != nil {
		p.spec.removeEndpoint(e.HostPort())
	}
	if p.sub == nil {
		return
	}
	p.sub.RemoveEndpoint(e.HostPort())
	p.store.RemoveEndpoint(e.HostPort())
}
