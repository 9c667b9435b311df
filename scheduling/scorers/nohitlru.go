package scorers

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// NoHitLRU is the no-hit-lru-scorer. It spreads cold requests — those no
// candidate holds any prefix block of — over the endpoints that least
// recently received a cold request, so new cache content grows evenly.
// Endpoints that never got a cold request rank first (in candidate order),
// then the others oldest first; rank r of n scores 1 − r/(n−1). A request
// with a prefix hit anywhere scores 0.5 everywhere (neutral). After the pick,
// a cold request moves the primary and a prefill profile's pick to the front.
type NoHitLRU struct {
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName" doc:"name of the producer whose prefix match tells cold from warm requests"`
	LRUSize                     int    `json:"lruSize" doc:"endpoints remembered at most"`

	key   prefixKey
	cold  plugins.Key[bool]
	once  sync.Once
	mu    sync.Mutex
	clock uint64
	last  map[string]uint64 // host:port → clock of its last cold request
}

var (
	_ scheduling.Scorer          = (*NoHitLRU)(nil)
	_ datalayer.EndpointListener = (*NoHitLRU)(nil)
)

// SetDefaults sets the defaults.
func (s *NoHitLRU) SetDefaults() {
	s.PrefixMatchInfoProducerName = scheduling.DefaultPrefixProducer
	s.LRUSize = 1024
}

// Validate checks lruSize.
func (s *NoHitLRU) Validate() error {
	if s.LRUSize <= 0 {
		return errors.New("lruSize: must be > 0")
	}
	return nil
}

// Init names the per-request cold flag after the instance.
func (s *NoHitLRU) Init(_ context.Context, deps plugins.Deps) error {
	s.setup(deps.Name)
	return nil
}

func (s *NoHitLRU) setup(name string) {
	s.once.Do(func() {
		if name == "" {
			name = "no-hit-lru-scorer"
		}
		if s.LRUSize <= 0 {
			s.LRUSize = 1024
		}
		s.cold = plugins.NewKey[bool]("no-hit-lru/cold/" + name)
		s.last = map[string]uint64{}
	})
}

// Consumes returns the producer's PrefixMatch key.
func (s *NoHitLRU) Consumes() []plugins.AnyKey {
	return []plugins.AnyKey{s.key.get(s.PrefixMatchInfoProducerName)}
}

// Score implements scheduling.Scorer.
func (s *NoHitLRU) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	s.setup("")
	m, ok := plugins.Get(&req.Data, s.key.get(s.PrefixMatchInfoProducerName))
	cold := !ok || m.Cold()
	plugins.Set(&req.Data, s.cold, cold)
	if !cold {
		for i := range scores {
			scores[i] = 0.5
		}
		return
	}
	n := len(eps)
	if n == 1 {
		scores[0] = 1
		return
	}
	// Order: never used (clock 0) in candidate order, then least recent first.
	type ranked struct {
		at  uint64
		idx int
	}
	order := make([]ranked, n)
	s.mu.Lock()
	for i, e := range eps {
		order[i] = ranked{s.last[e.HostPort()], i}
	}
	s.mu.Unlock()
	slices.SortStableFunc(order, func(a, b ranked) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	for r, o := range order {
		scores[o.idx] = 1 - float64(r)/float64(n-1)
	}
}

// PreRequest records a cold request's picks as most recently used.
func (s *NoHitLRU) PreRequest(_ context.Context, req *scheduling.Request, res *scheduling.Result) {
	s.setup("")
	if cold, _ := plugins.Get(&req.Data, s.cold); !cold {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pr := range res.Profiles {
		if len(pr.Endpoints) == 0 || (pr.Profile != res.Primary && pr.Profile != "prefill") {
			continue
		}
		s.clock++
		s.last[pr.Endpoints[0].HostPort()] = s.clock
	}
	for len(s.last) > s.LRUSize { // forget the least recently used
		oldest, at := "", ^uint64(0)
		for k, v := range s.last {
			if v < at {
				oldest, at = k, v
			}
		}
		delete(s.last, oldest)
	}
}

// EndpointAdded does nothing: a new endpoint ranks as never used.
func (s *NoHitLRU) EndpointAdded(*datalayer.Endpoint) {}

// EndpointRemoved forgets the endpoint.
func (s *NoHitLRU) EndpointRemoved(e *datalayer.Endpoint) {
	s.setup("")
	s.mu.Lock()
	delete(s.last, e.HostPort())
	s.mu.Unlock()
}
