package customscorer

import (
	"context"
	"errors"

	"github.com/eppkit/eppkit/scheduling"
)

// LeastBusy scores an endpoint by the requests it already has, waiting and
// running together: 1/(1 + W + RunningWeight·R). An idle endpoint scores 1;
// the score halves once the endpoint holds the equivalent of one waiting
// request. Unlike queue-scorer it does not depend on the other candidates.
//
// The struct is the plugin's configuration: its exported, json-tagged fields
// are the YAML parameters. It keeps no state, so Score is safe for
// concurrent use.
type LeastBusy struct {
	RunningWeight float64 `json:"runningWeight" doc:"how much one running request counts against an endpoint, relative to one waiting request"`
}

// The compiler checks that LeastBusy is a scorer.
var _ scheduling.Scorer = (*LeastBusy)(nil)

// SetDefaults runs on the fresh value before the YAML parameters are
// decoded into it: a running request counts a quarter of a waiting one.
func (s *LeastBusy) SetDefaults() { s.RunningWeight = 0.25 }

// Validate runs after decoding; its error names the parameter.
func (s *LeastBusy) Validate() error {
	if s.RunningWeight < 0 {
		return errors.New("runningWeight: must be >= 0")
	}
	return nil
}

// Score implements scheduling.Scorer. scores is zeroed, index-aligned with
// eps and owned by the runtime; an endpoint without usable metrics keeps 0,
// the worst score.
func (s *LeastBusy) Score(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i, e := range eps {
		if !e.Metrics.Usable() {
			continue
		}
		busy := float64(e.Metrics.Waiting) + s.RunningWeight*float64(e.Metrics.Running)
		scores[i] = 1 / (1 + busy)
	}
}
