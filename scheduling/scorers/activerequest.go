package scorers

import (
	"context"
	"errors"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// ActiveRequest is the active-request-scorer: it prefers endpoints with
// fewer requests in flight from this picker (its own count, current between
// metric scrapes). With n an endpoint's in-flight requests and max the
// largest n among the candidates: n ≤ idleThreshold scores 1, otherwise
// maxBusyScore·(max − n)/max. Without in-flight data every endpoint scores 1.
type ActiveRequest struct {
	IdleThreshold            int     `json:"idleThreshold" doc:"in-flight requests at or below which an endpoint counts as idle and scores 1"`
	MaxBusyScore             float64 `json:"maxBusyScore" doc:"the best score of a busy endpoint, 0..1 (below 1 opens a gap between idle and busy)"`
	InFlightLoadProducerName string  `json:"inFlightLoadProducerName" doc:"name of the producer whose in-flight load to read"`

	key inFlightKey
}

var (
	_ scheduling.Scorer = (*ActiveRequest)(nil)
	_ plugins.Consumer  = (*ActiveRequest)(nil)
)

// SetDefaults sets maxBusyScore 1 and the default producer.
func (s *ActiveRequest) SetDefaults() {
	s.MaxBusyScore = 1
	s.InFlightLoadProducerName = DefaultInFlightProducer
}

// Validate checks the parameters.
func (s *ActiveRequest) Validate() error {
	var errs []error
	if s.IdleThreshold < 0 {
		errs = append(errs, errors.New("idleThreshold: must be ≥ 0"))
	}
	if !(s.MaxBusyScore >= 0 && s.MaxBusyScore <= 1) {
		errs = append(errs, errors.New("maxBusyScore: must be within 0..1"))
	}
	return errors.Join(errs...)
}

// Consumes returns the producer's in-flight key.
func (s *ActiveRequest) Consumes() []plugins.AnyKey {
	return []plugins.AnyKey{s.key.get(s.InFlightLoadProducerName)}
}

// Score implements scheduling.Scorer. A zero-value scorer (built in Go
// without SetDefaults) uses maxBusyScore 1.
func (s *ActiveRequest) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	src, ok := plugins.Get(&req.Data, s.key.get(s.InFlightLoadProducerName))
	busy := s.MaxBusyScore
	if busy == 0 && s.InFlightLoadProducerName == "" {
		busy = 1
	}
	var most int64
	for i, e := range eps {
		var n int64
		if ok && src != nil {
			n, _ = src.InFlight(e)
		}
		scores[i] = float64(n) // park the count
		most = max(most, n)
	}
	for i := range eps {
		n := int64(scores[i])
		if n <= int64(s.IdleThreshold) {
			scores[i] = 1
			continue
		}
		scores[i] = busy * float64(most-n) / float64(most)
	}
}
