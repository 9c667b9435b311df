package pickers

import (
	"context"
	"math"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// WeightedRandom is the weighted-random-picker: it picks an endpoint with
// probability proportional to its total (negative, NaN or infinite totals
// weigh 0), and uniformly when every total is 0. With MaxNumOfEndpoints > 1
// it draws the fallbacks the same way from the endpoints not yet picked
// (sampling without replacement).
type WeightedRandom struct {
	MaxNumOfEndpoints int `json:"maxNumOfEndpoints" doc:"number of endpoints to return: the primary, then fallbacks (>= 1)"`

	randSource
}

var (
	_ scheduling.Picker   = (*WeightedRandom)(nil)
	_ plugins.Initializer = (*WeightedRandom)(nil)
)

// SetDefaults sets MaxNumOfEndpoints to 1.
func (p *WeightedRandom) SetDefaults() { p.MaxNumOfEndpoints = 1 }

// Validate rejects MaxNumOfEndpoints < 1.
func (p *WeightedRandom) Validate() error {
	return validateMax("weighted-random-picker", p.MaxNumOfEndpoints)
}

// Init takes the random source from deps.
func (p *WeightedRandom) Init(_ context.Context, deps plugins.Deps) error { return p.init(deps) }

// Pick implements scheduling.Picker.
func (p *WeightedRandom) Pick(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, totals []float64) []*scheduling.Endpoint {
	n := len(eps)
	if n == 0 {
		return nil
	}
	r := p.rand()
	k := count(p.MaxNumOfEndpoints, n)
	if k == 1 {
		return []*scheduling.Endpoint{eps[draw(r.Float64(), r.IntN, totals, nil)]}
	}
	out := make([]*scheduling.Endpoint, 0, k)
	taken := make([]bool, n)
	for range k {
		i := draw(r.Float64(), r.IntN, totals, taken)
		taken[i] = true
		out = append(out, eps[i])
	}
	return out
}

// weight is a total as a sampling weight: 0 for negative, NaN or infinite.
func weight(v float64) float64 {
	if v > 0 && !math.IsInf(v, 1) {
		return v
	}
	return 0
}

// draw returns an index not taken, chosen with probability ∝ its weight given
// u uniform in [0,1), or uniformly (with intN) among those not taken when all
// their weights are 0. taken may be nil (none taken); at least one index must
// be free.
func draw(u float64, intN func(int) int, totals []float64, taken []bool) int {
	free := func(i int) bool { return taken == nil || !taken[i] }
	sum, nFree := 0.0, 0
	for i, v := range totals {
		if free(i) {
			sum += weight(v)
			nFree++
		}
	}
	if sum > 0 && !math.IsInf(sum, 1) {
		target, last := u*sum, -1
		for i, v := range totals {
			if !free(i) || weight(v) == 0 {
				continue
			}
			last = i
			if target -= weight(v); target < 0 {
				return i
			}
		}
		return last // rounding left target ≥ 0: the last weighted endpoint
	}
	nth := intN(nFree)
	for i := range totals {
		if free(i) {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
	return 0 // unreachable while an index is free
}
