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
	once  sync.Once
	mu    sync.Mutex
	clock uint64
	last  map[string]uint64 // host:port → clock of its last cold request
	order []ranked          // Score's scratch, guarded by mu
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

func (s *NoHitLRU) setup() {
	s.once.Do(func() {
		if s.LRUSize <= 0 {
			s.LRUSize = 1024
		}
		s.last = map[string]uint64{}
	})
}

// isCold reports whether no candidate holds any block of the request (or no
// prefix data exists for it).
func (s *NoHitLRU) isCold(req *scheduling.Request) bool {
	m, ok := plugins.Get(&req.Data, s.key.get(s.PrefixMatchInfoProducerName))
	return !ok || m.Cold()
}

type ranked struct {
	at  uint64
	idx int
}

// Consumes returns the producer's PrefixMatch key.
func (s *NoHitLRU) Consumes() []plugins.AnyKey {
	return []plugins.AnyKey{s.key.get(s.PrefixMatchInfoProducerName)}
}

// Score implements scheduling.Scorer.
func (s *NoHitLRU) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	s.setup()
	if !s.isCold(req) {
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
	// The ranking is short; it runs under the lock, in the scorer's buffer.
	s.mu.Lock()
	defer s.mu.Unlock()
	order := append(s.order[:0], make([]ranked, n)...)
	s.order = order
	for i, e := range eps {
		order[i] = ranked{s.last[e.HostPort()], i}
	}
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

// PreRequest records a cold request's picks as most recently used. The
// producers' data decides coldness again, so Score stores nothing.
func (s *NoHitLRU) PreRequest(_ context.Context, req *scheduling.Request, res *scheduling.Result) {
	s.setup()
	if !s.isCold(req) {
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
	s.setup()
	s.mu.Lock()
	delete(s.last, e.HostPort())
	s.mu.Unlock()
}
