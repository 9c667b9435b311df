package customscorer

import (
	"context"

	"github.com/eppkit/eppkit/scheduling"
)

// PreferLabel scores 1 for endpoints whose label Key equals Value, 0 otherwise:
// e.g. prefer the newer GPU generation while both serve.
type PreferLabel struct {
	Key   string `json:"key" doc:"label name"`
	Value string `json:"value" doc:"label value that scores 1"`
}

// Score implements scheduling.Scorer.
func (s *PreferLabel) Score(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i, e := range eps {
		if e.Labels[s.Key] == s.Value {
			scores[i] = 1
		}
	}
}
