package pickers

import (
	"cmp"
	"context"
	"slices"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// MaxScore is the max-score-picker: it picks the endpoint with the highest
// total, choosing uniformly at random among those that tie. With
// MaxNumOfEndpoints > 1 the fallbacks follow in descending order of total,
// ties again in random order. A NaN total counts as −Inf.
//
// The result has the distribution of llm-d's shuffle-then-sort without the
// shuffle: for one endpoint, a single pass with reservoir sampling over the
// ties; for a few, a pass per distinct total taken; for many, a sort followed
// by shuffling only the tied runs returned.
type MaxScore struct {
	MaxNumOfEndpoints int `json:"maxNumOfEndpoints" doc:"number of endpoints to return: the primary, then fallbacks (>= 1)"`

	randSource
}

var (
	_ scheduling.Picker   = (*MaxScore)(nil)
	_ plugins.Initializer = (*MaxScore)(nil)
)

// SetDefaults sets MaxNumOfEndpoints to 1.
func (p *MaxScore) SetDefaults() { p.MaxNumOfEndpoints = 1 }

// Validate rejects MaxNumOfEndpoints < 1.
func (p *MaxScore) Validate() error { return validateMax("max-score-picker", p.MaxNumOfEndpoints) }

// Init takes the random source from deps.
func (p *MaxScore) Init(_ context.Context, deps plugins.Deps) error { return p.init(deps) }

// Pick implements scheduling.Picker.
func (p *MaxScore) Pick(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, totals []float64) []*scheduling.Endpoint {
	n := len(eps)
	if n == 0 {
		return nil
	}
	switch k := count(p.MaxNumOfEndpoints, n); {
	case k > levelsUpTo:
		return p.pickSorted(eps, totals, k)
	case k > 1:
		return p.pickLevels(eps, totals, k)
	}
	r := p.rand()
	best, bestV, ties := 0, key(totals[0]), 1
	for i := 1; i < n; i++ {
		switch v := key(totals[i]); {
		case v > bestV:
			best, bestV, ties = i, v, 1
		case v == bestV:
			ties++
			if r.IntN(ties) == 0 { // keep each of the ties with probability 1/ties
				best = i
			}
		}
	}
	return []*scheduling.Endpoint{eps[best]}
}

// levelsUpTo is the largest MaxNumOfEndpoints served by pickLevels, whose
// cost grows with k; above it a sort is cheaper.
const levelsUpTo = 8

// pickLevels fills the result level by level: all endpoints with the highest
// total in random order, then those with the next highest, and so on. A level
// with more endpoints than places left is sampled uniformly (reservoir) and
// shuffled. Each level takes two passes over the totals, so the cost is
// O(n·k) and nothing but the result is allocated.
func (p *MaxScore) pickLevels(eps []*scheduling.Endpoint, totals []float64, k int) []*scheduling.Endpoint {
	r := p.rand()
	out := make([]*scheduling.Endpoint, 0, k)
	var upper float64 // levels already taken are ≥ upper
	for first := true; len(out) < k; first = false {
		level, found := 0.0, false
		for _, v := range totals {
			if v := key(v); (first || v < upper) && (!found || v > level) {
				level, found = v, true
			}
		}
		if !found {
			break
		}
		start, need, seen := len(out), k-len(out), 0
		for i, v := range totals {
			if key(v) != level {
				continue
			}
			if seen++; seen <= need {
				out = append(out, eps[i])
			} else if j := r.IntN(seen); j < need {
				out[start+j] = eps[i]
			}
		}
		if tied := out[start:]; len(tied) > 1 {
			r.Shuffle(len(tied), func(i, j int) { tied[i], tied[j] = tied[j], tied[i] })
		}
		upper = level
	}
	return out
}

// pickSorted orders the indices by descending total, then shuffles each run
// of equal totals that reaches into the first k, so ties come out in random
// order. Only ties consume random numbers.
func (p *MaxScore) pickSorted(eps []*scheduling.Endpoint, totals []float64, k int) []*scheduling.Endpoint {
	idx := make([]int, len(eps))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(totals[b], totals[a]); c != 0 {
			return c // descending; NaN last
		}
		return a - b
	})
	r := p.rand()
	for start := 0; start < k; {
		end := start + 1
		for end < len(idx) && cmp.Compare(totals[idx[end]], totals[idx[start]]) == 0 {
			end++
		}
		// Partial Fisher-Yates: a uniform random order for the tied
		// positions that will be returned.
		for i := start; i < min(end, k) && end-i > 1; i++ {
			j := i + r.IntN(end-i)
			idx[i], idx[j] = idx[j], idx[i]
		}
		start = end
	}
	out := make([]*scheduling.Endpoint, k)
	for i := range out {
		out[i] = eps[idx[i]]
	}
	return out
}
