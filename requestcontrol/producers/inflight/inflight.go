package inflight

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/redisindex"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/internal/indexbackend"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// Token release points.
const (
	ReleaseOnFirstChunk = "firstChunk"
	ReleaseOnCompletion = "completion"
)

// Producer is the inflight-load-producer plugin.
type Producer struct {
	ReleaseTokensOn string `json:"releaseTokensOn" doc:"when a request's prompt tokens stop counting: firstChunk (prefill done) or completion"`
	// IndexBackend is named as the prefix producers' parameter is, so that
	// one word says where every shared thing of the picker lives.
	IndexBackend string                   `json:"indexBackend" doc:"memory (each replica counts only the requests it sent) or redis (replicas share their counts, so their load scorers agree); named as in the prefix producers"`
	Redis        indexbackend.RedisParams `json:"redis" doc:"the shared counts' server, for indexBackend redis, as for the prefix producers (ttl, writeQueue and mirror do not apply: counts expire after expiry)"`
	SyncInterval plugins.Duration         `json:"syncInterval" doc:"with indexBackend redis, how often a replica publishes its counts and reads the others', in one round trip"`
	Expiry       plugins.Duration         `json:"expiry" doc:"with indexBackend redis, how long a replica's published counts last without a new publish (a dead replica's drop out after it); at least twice syncInterval"`
	ReplicaID    string                   `json:"replicaID" doc:"with indexBackend redis, this replica's name among those sharing the counts, unique to it (empty: random per process)"`

	once    sync.Once
	name    string
	key     plugins.Key[scorers.InFlightSource]
	loadKey plugins.Key[*requestcontrol.Load]
	tracker requestcontrol.LoadTracker
	shared  *redisindex.InFlight // indexBackend redis
	seen    sync.Map             // indexBackend redis: host:port → *datalayer.Endpoint counted
}

var (
	_ requestcontrol.DataProducer     = (*Producer)(nil)
	_ requestcontrol.PreRequest       = (*Producer)(nil)
	_ requestcontrol.ResponseChunk    = (*Producer)(nil)
	_ requestcontrol.ResponseComplete = (*Producer)(nil)
	_ datalayer.EndpointListener      = (*Producer)(nil)
	_ plugins.Closer                  = (*Producer)(nil)
	_ scorers.InFlightSource          = (*requestcontrol.LoadTracker)(nil)
	_ scorers.InFlightSource          = (*Producer)(nil)
)

// SetDefaults releases tokens on the first chunk and keeps the counts in
// memory.
func (p *Producer) SetDefaults() {
	p.ReleaseTokensOn = ReleaseOnFirstChunk
	p.IndexBackend = indexbackend.Memory
	p.Redis.SetDefaults()
	p.SyncInterval = plugins.Duration(redisindex.DefaultInFlightInterval)
	p.Expiry = plugins.Duration(redisindex.DefaultInFlightExpiryIntervals * redisindex.DefaultInFlightInterval)
}

// Validate checks releaseTokensOn and the backend's parameters.
func (p *Producer) Validate() error {
	var errs []error
	switch p.ReleaseTokensOn {
	case ReleaseOnFirstChunk, ReleaseOnCompletion, "":
	default:
		errs = append(errs, errors.New(`releaseTokensOn: want "firstChunk" or "completion", got "`+p.ReleaseTokensOn+`"`))
	}
	if p.IndexBackend != "" { // "": a value built in Go, memory
		errs = append(errs, indexbackend.Validate(p.IndexBackend, &p.Redis)...)
	}
	if p.IndexBackend == indexbackend.Redis {
		if p.SyncInterval <= 0 {
			errs = append(errs, errors.New("syncInterval: must be > 0"))
		}
		if p.Expiry < 2*p.SyncInterval {
			errs = append(errs, errors.New("expiry: must be at least twice syncInterval"))
		}
	}
	return errors.Join(errs...)
}

// Init names the data key after the instance. With indexBackend redis it
// starts sharing the counts, which connects lazily: a server that is down
// at startup only means local counts until it is up.
func (p *Producer) Init(_ context.Context, deps plugins.Deps) error {
	p.name = deps.Name
	if p.IndexBackend == indexbackend.Redis {
		deps = deps.WithDefaults()
		log := deps.Logger.With("plugin", p.name)
		cfg, err := p.Redis.Config(log)
		if err != nil {
			return err
		}
		shared, err := redisindex.NewInFlight(cfg, redisindex.InFlightConfig{
			ReplicaID: p.ReplicaID,
			Interval:  time.Duration(p.SyncInterval),
			Expiry:    time.Duration(p.Expiry),
			Local:     p.local,
		})
		if err != nil {
			return err
		}
		p.shared = shared
		log.Info("inflight: sharing in-flight counts", "replica", shared.ReplicaID(), "address", cfg.Address)
	}
	p.ready()
	return nil
}

// Close stops sharing the counts and withdraws this replica's from the
// server; the memory backend has nothing to close.
func (p *Producer) Close() error {
	if p.shared != nil {
		return p.shared.Close()
	}
	return nil
}

// BackendStats counts the shared counts' calls to their server (the error
// metric of indexBackend redis); the zero value for the memory backend.
func (p *Producer) BackendStats() kvindex.BackendStats {
	if p.shared != nil {
		return p.shared.BackendStats()
	}
	return kvindex.BackendStats{}
}

// InFlight returns e's in-flight requests and tokens across the replicas:
// this replica's own, exact, plus the others' as last read (with the memory
// backend, or while the server is unreachable, its own only). It does no
// I/O.
func (p *Producer) InFlight(e *datalayer.Endpoint) (requests, tokens int64) {
	requests, tokens = p.tracker.InFlight(e)
	if p.shared != nil {
		r, t := p.shared.Remote(e.HostPort())
		requests, tokens = requests+r, tokens+t
	}
	return requests, tokens
}

// local reports this replica's counts to the shared counts.
func (p *Producer) local(yield func(endpoint string, requests, tokens int64)) {
	p.seen.Range(func(k, v any) bool {
		r, t := p.tracker.InFlight(v.(*datalayer.Endpoint))
		yield(k.(string), r, t)
		return true
	})
}

func (p *Producer) ready() {
	p.once.Do(func() {
		if p.name == "" {
			p.name = scorers.DefaultInFlightProducer
		}
		p.key = scorers.InFlightKey(p.name)
		p.loadKey = plugins.NewKey[*requestcontrol.Load]("inflight-load-ticket/" + p.name)
	})
}

// Tracker returns the producer's counters: this replica's own.
func (p *Producer) Tracker() *requestcontrol.LoadTracker { return &p.tracker }

// Produces returns the in-flight key named after the instance.
func (p *Producer) Produces() []plugins.AnyKey {
	p.ready()
	return []plugins.AnyKey{p.key}
}

// Produce publishes the counters to the request: this replica's, or with
// indexBackend redis every replica's (InFlight).
func (p *Producer) Produce(_ context.Context, req *scheduling.Request, _ []*scheduling.Endpoint) error {
	p.ready()
	if p.shared != nil {
		plugins.Set[scorers.InFlightSource](&req.Data, p.key, p)
	} else {
		plugins.Set[scorers.InFlightSource](&req.Data, p.key, &p.tracker)
	}
	return nil
}

// PreRequest counts the request on its primary endpoint.
func (p *Producer) PreRequest(_ context.Context, req *scheduling.Request, res *scheduling.Result) {
	p.ready()
	primary := res.PrimaryResult()
	if primary == nil || len(primary.Endpoints) == 0 {
		return
	}
	tokens := 0
	if req.Body != nil {
		tokens = req.Body.TokenEstimate()
	}
	e := primary.Endpoints[0]
	if p.shared != nil {
		if _, ok := p.seen.Load(e.HostPort()); !ok {
			p.seen.LoadOrStore(e.HostPort(), e)
		}
	}
	plugins.Set(&req.Data, p.loadKey, p.tracker.Start(e, int64(tokens)))
}

// ResponseChunk releases the tokens at the first chunk.
func (p *Producer) ResponseChunk(_ context.Context, req *scheduling.Request, _ *scheduling.Endpoint, _ []byte) {
	if p.ReleaseTokensOn == ReleaseOnCompletion {
		return
	}
	p.ready()
	if l, ok := plugins.Get(&req.Data, p.loadKey); ok {
		l.ReleaseTokens()
	}
}

// ResponseComplete releases the request.
func (p *Producer) ResponseComplete(_ context.Context, req *scheduling.Request, _ *scheduling.Endpoint, _ parsers.Usage, _ error) {
	p.ready()
	if l, ok := plugins.Get(&req.Data, p.loadKey); ok {
		l.Release()
	}
}

// EndpointAdded does nothing: a new endpoint has nothing in flight.
func (p *Producer) EndpointAdded(*datalayer.Endpoint) {}

// EndpointRemoved drops the endpoint's counters (and, with indexBackend
// redis, stops publishing them).
func (p *Producer) EndpointRemoved(e *datalayer.Endpoint) {
	p.seen.Delete(e.HostPort())
	p.tracker.Forget(e)
}
