package pickers

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync/atomic"

	"github.com/eppkit/eppkit/plugins"
)

// randSource holds the random source a picker got from Init, falling back to
// one seeded with 1 when Init was never called. It is embedded, unexported, in
// every picker.
type randSource struct{ r atomic.Pointer[rand.Rand] }

func (s *randSource) init(deps plugins.Deps) error {
	if deps.Rand != nil {
		s.r.Store(deps.Rand)
	}
	return nil
}

func (s *randSource) rand() *rand.Rand {
	if r := s.r.Load(); r != nil {
		return r
	}
	s.r.CompareAndSwap(nil, plugins.NewRand(1))
	return s.r.Load()
}

// count is MaxNumOfEndpoints bounded by the candidates, at least 1.
func count(maxNum, n int) int { return min(max(maxNum, 1), n) }

func validateMax(typ string, maxNum int) error {
	if maxNum < 1 {
		return errors.New(typ + ": maxNumOfEndpoints: must be >= 1")
	}
	return nil
}

// key orders totals with NaN below every number, so a NaN total never wins
// over a real one.
func key(v float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(-1)
	}
	return v
}
