package scorers

import (
	"context"

	"github.com/eppkit/eppkit/scheduling"
)

// KVCacheUtilization is the kv-cache-utilization-scorer: 1 − kvUsage, so an
// endpoint with an empty KV cache scores 1 and a full one 0. It has no
// parameters.
type KVCacheUtilization struct{}

var _ scheduling.Scorer = (*KVCacheUtilization)(nil)

// Score implements scheduling.Scorer.
func (*KVCacheUtilization) Score(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i, e := range eps {
		if e.Metrics.Usable() {
			scores[i] = max(0, 1-e.Metrics.KVUsage) // usage above 1 is over-full: 0
		}
	}
}
