package scorers

import (
	"context"
	"errors"

	"github.com/eppkit/eppkit/scheduling"
)

// DefaultLoadThreshold is the waiting-queue length at which the load-aware
// scorer gives 0.
const DefaultLoadThreshold = 128

// LoadAware is the load-aware-scorer: an endpoint with an empty queue scores
// 0.5; one with W waiting requests scores 0.5·(1 − min(W,T)/T), reaching 0 at
// T = Threshold. Unlike Queue, the score does not depend on the other
// candidates.
type LoadAware struct {
	Threshold int `json:"threshold" doc:"waiting-queue length at which an endpoint scores 0 (must be > 0)"`
}

var _ scheduling.Scorer = (*LoadAware)(nil)

// SetDefaults sets Threshold to DefaultLoadThreshold.
func (s *LoadAware) SetDefaults() { s.Threshold = DefaultLoadThreshold }

// Validate rejects a threshold that is not positive.
func (s *LoadAware) Validate() error {
	if s.Threshold <= 0 {
		return errors.New("load-aware-scorer: threshold: must be > 0")
	}
	return nil
}

// Score implements scheduling.Scorer. A zero Threshold (a struct built in Go
// without SetDefaults) means DefaultLoadThreshold.
func (s *LoadAware) Score(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	t := s.Threshold
	if t <= 0 {
		t = DefaultLoadThreshold
	}
	for i, e := range eps {
		if !e.Metrics.Usable() {
			continue
		}
		if w := e.Metrics.Waiting; w == 0 {
			scores[i] = 0.5
		} else {
			scores[i] = 0.5 * (1 - float64(min(w, t))/float64(t))
		}
	}
}
