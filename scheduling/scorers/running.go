package scorers

import (
	"context"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/scheduling"
)

// RunningRequests is the running-requests-size-scorer: it prefers endpoints
// running fewer requests, min-max normalised over the candidates like Queue:
// (maxR − R)/(maxR − minR), and 1 for every endpoint when all are equal. It has
// no parameters.
type RunningRequests struct{}

var _ scheduling.Scorer = (*RunningRequests)(nil)

// Score implements scheduling.Scorer.
func (*RunningRequests) Score(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	minMax(eps, scores, running)
}

func running(m *datalayer.Metrics) int { return m.Running }
