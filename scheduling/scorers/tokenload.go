package scorers

import (
	"context"
	"errors"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// DefaultTokenThreshold is the token load at which the token-load scorer
// gives 0: 128 requests of 32K tokens.
const DefaultTokenThreshold = 4_194_304

// TokenLoad is the token-load-scorer: 1 − min(t, T)/T, where t is the
// prompt tokens this picker has in flight on the endpoint (not yet past
// prefill) plus the tokens this request would add there: its prompt tokens
// less the blocks the endpoint already holds, when a prefix producer reports
// them. T is queueThresholdTokens.
type TokenLoad struct {
	QueueThresholdTokens        int64  `json:"queueThresholdTokens" doc:"token load at which an endpoint scores 0 (must be > 0)"`
	InFlightLoadProducerName    string `json:"inFlightLoadProducerName" doc:"name of the producer whose in-flight load to read"`
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName" doc:"name of the prefix producer whose match discounts cached tokens (used when present)"`

	key    inFlightKey
	prefix prefixKey
}

var (
	_ scheduling.Scorer = (*TokenLoad)(nil)
	_ plugins.Consumer  = (*TokenLoad)(nil)
)

// SetDefaults sets the SPEC defaults.
func (s *TokenLoad) SetDefaults() {
	s.QueueThresholdTokens = DefaultTokenThreshold
	s.InFlightLoadProducerName = DefaultInFlightProducer
	s.PrefixMatchInfoProducerName = scheduling.DefaultPrefixProducer
}

// Validate checks the threshold.
func (s *TokenLoad) Validate() error {
	if s.QueueThresholdTokens <= 0 {
		return errors.New("queueThresholdTokens: must be > 0")
	}
	return nil
}

// Consumes returns the in-flight key. The prefix match is read when some
// producer writes it but is not required.
func (s *TokenLoad) Consumes() []plugins.AnyKey {
	return []plugins.AnyKey{s.key.get(s.InFlightLoadProducerName)}
}

// Score implements scheduling.Scorer.
func (s *TokenLoad) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	limit := float64(s.QueueThresholdTokens)
	if limit <= 0 {
		limit = DefaultTokenThreshold
	}
	src, _ := plugins.Get(&req.Data, s.key.get(s.InFlightLoadProducerName))
	m, _ := plugins.Get(&req.Data, s.prefix.get(s.PrefixMatchInfoProducerName))
	own := 0.0
	if req.Body != nil {
		own = float64(req.Body.TokenEstimate())
	}
	for i, e := range eps {
		t := own
		if m != nil && m.BlockTokens > 0 {
			t = max(0, t-m.MatchedFor(e, i)*float64(m.BlockTokens))
		}
		if src != nil {
			_, tokens := src.InFlight(e)
			t += float64(tokens)
		}
		scores[i] = 1 - min(t, limit)/limit
	}
}
