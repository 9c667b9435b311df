package filters

import (
	"context"
	"errors"
	"sync"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// PrefixAffinity is the prefix-cache-affinity-filter: when the best prefix
// match among the candidates is high enough (ratio ≥ affinityThreshold), it
// keeps only the endpoints whose ratio is within tolerance of the best, so a
// conversation stays where its cache is; otherwise (a cold or barely warm
// request) it keeps every candidate. Without prefix data it keeps all.
//
// llm-d's filter also breaks affinity when the warm endpoints' estimated
// time-to-first-token (in-flight tokens / peak prefill throughput) exceeds
// the best cold one's by a margin; that gate needs in-flight token counts and
// is left to a load-aware scorer here.
type PrefixAffinity struct {
	PrefixMatchInfoProducerName string  `json:"prefixMatchInfoProducerName" doc:"name of the producer whose prefix match to read"`
	AffinityThreshold           float64 `json:"affinityThreshold" doc:"best match ratio (0..1) from which affinity applies"`
	Tolerance                   float64 `json:"tolerance" doc:"keep endpoints whose ratio is at least best − tolerance"`

	once sync.Once
	key  plugins.Key[*scheduling.PrefixMatch]
}

var _ scheduling.Filter = (*PrefixAffinity)(nil)

// SetDefaults sets the defaults.
func (f *PrefixAffinity) SetDefaults() {
	f.PrefixMatchInfoProducerName = scheduling.DefaultPrefixProducer
	f.AffinityThreshold = 0.5
	f.Tolerance = 0.1
}

// Validate checks the ratios.
func (f *PrefixAffinity) Validate() error {
	if !(f.AffinityThreshold >= 0 && f.AffinityThreshold <= 1) {
		return errors.New("affinityThreshold: must be within 0..1")
	}
	if !(f.Tolerance >= 0 && f.Tolerance <= 1) {
		return errors.New("tolerance: must be within 0..1")
	}
	return nil
}

func (f *PrefixAffinity) dataKey() plugins.Key[*scheduling.PrefixMatch] {
	f.once.Do(func() {
		name := f.PrefixMatchInfoProducerName
		if name == "" {
			name = scheduling.DefaultPrefixProducer
		}
		f.key = scheduling.PrefixMatchKey(name)
	})
	return f.key
}

// Consumes returns the producer's PrefixMatch key.
func (f *PrefixAffinity) Consumes() []plugins.AnyKey { return []plugins.AnyKey{f.dataKey()} }

// Filter implements scheduling.Filter.
func (f *PrefixAffinity) Filter(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
	m, ok := plugins.Get(&req.Data, f.dataKey())
	if !ok || m.TotalBlocks == 0 {
		return eps
	}
	best := 0.0
	for i, e := range eps {
		best = max(best, m.Ratio(e, i))
	}
	if best == 0 || best < f.AffinityThreshold {
		return eps
	}
	floor := best - f.Tolerance
	kept := 0
	for i, e := range eps {
		if m.Ratio(e, i) >= floor {
			kept++
		}
	}
	if kept == len(eps) {
		return eps
	}
	out := make([]*scheduling.Endpoint, 0, kept)
	for i, e := range eps {
		if m.Ratio(e, i) >= floor {
			out = append(out, e)
		}
	}
	return out
}
