package scorers

import (
	"context"
	"math"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/scheduling"
)

// Queue is the queue-scorer: it prefers endpoints with fewer requests waiting
// in the engine queue, min-max normalised over the candidates:
// (maxW − W)/(maxW − minW), and 1 for every endpoint when all queues are equal.
// It has no parameters.
type Queue struct{}

var _ scheduling.Scorer = (*Queue)(nil)

// Score implements scheduling.Scorer.
func (*Queue) Score(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	minMax(eps, scores, waiting)
}

func waiting(m *datalayer.Metrics) int { return m.Waiting }

// minMax scores (max − v)/(max − min) over the endpoints with usable metrics,
// 1 when they all share one value, and 0 for endpoints without usable metrics.
// The first pass parks each value in scores (−1 marks an unusable endpoint),
// so the second pass does not touch the endpoints again.
func minMax(eps []*scheduling.Endpoint, scores []float64, value func(*datalayer.Metrics) int) {
	lo, hi := math.MaxInt, math.MinInt
	for i, e := range eps {
		if !e.Metrics.Usable() {
			scores[i] = -1
			continue
		}
		v := value(&e.Metrics)
		scores[i] = float64(v)
		lo, hi = min(lo, v), max(hi, v)
	}
	flo, fhi := float64(lo), float64(hi)
	for i, v := range scores[:len(eps)] {
		switch {
		case v < 0:
			scores[i] = 0
		case hi == lo:
			scores[i] = 1
		default:
			scores[i] = (fhi - v) / (fhi - flo)
		}
	}
}
