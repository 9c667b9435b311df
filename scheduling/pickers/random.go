package pickers

import (
	"context"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// Random is the random-picker: it ignores the totals and picks endpoints
// uniformly at random, MaxNumOfEndpoints distinct ones (primary first).
type Random struct {
	MaxNumOfEndpoints int `json:"maxNumOfEndpoints" doc:"number of endpoints to return: the primary, then fallbacks (>= 1)"`

	randSource
}

var (
	_ scheduling.Picker   = (*Random)(nil)
	_ plugins.Initializer = (*Random)(nil)
)

// SetDefaults sets MaxNumOfEndpoints to 1.
func (p *Random) SetDefaults() { p.MaxNumOfEndpoints = 1 }

// Validate rejects MaxNumOfEndpoints < 1.
func (p *Random) Validate() error { return validateMax("random-picker", p.MaxNumOfEndpoints) }

// Init takes the random source from deps.
func (p *Random) Init(_ context.Context, deps plugins.Deps) error { return p.init(deps) }

// Pick implements scheduling.Picker.
func (p *Random) Pick(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, _ []float64) []*scheduling.Endpoint {
	n := len(eps)
	if n == 0 {
		return nil
	}
	r := p.rand()
	k := count(p.MaxNumOfEndpoints, n)
	if k == 1 {
		return []*scheduling.Endpoint{eps[r.IntN(n)]}
	}
	// Partial Fisher-Yates over a copy: the first k are a uniform sample.
	out := append([]*scheduling.Endpoint(nil), eps...)
	for i := range k {
		j := i + r.IntN(n-i)
		out[i], out[j] = out[j], out[i]
	}
	return out[:k:k]
}
