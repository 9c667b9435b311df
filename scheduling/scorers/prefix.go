package scorers

import (
	"context"
	"errors"
	"sync"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// prefixKey resolves the PrefixMatch key of a configured producer name once.
type prefixKey struct {
	once sync.Once
	key  plugins.Key[*scheduling.PrefixMatch]
}

func (k *prefixKey) get(producer string) plugins.Key[*scheduling.PrefixMatch] {
	k.once.Do(func() {
		if producer == "" {
			producer = scheduling.DefaultPrefixProducer
		}
		k.key = scheduling.PrefixMatchKey(producer)
	})
	return k.key
}

// PrefixCache is the prefix-cache-scorer: the share of the request's blocks
// an endpoint already holds, matched/total, from the configured prefix
// producer (approximate by default). With matchLengthWeight w the score is
// (1−w)·ratio + w·min(1, matchedTokens/matchLengthScaleTokens)², so long
// absolute matches can count beyond their share of a long prompt.
type PrefixCache struct {
	PrefixMatchInfoProducerName string  `json:"prefixMatchInfoProducerName" doc:"name of the producer whose prefix match to read (approx-prefix-cache-producer, or a precise producer)"`
	MatchLengthWeight           float64 `json:"matchLengthWeight" doc:"weight w of the absolute match-length term, 0..1"`
	MatchLengthScaleTokens      int     `json:"matchLengthScaleTokens" doc:"matched tokens at which the match-length term saturates"`

	key prefixKey
}

var (
	_ scheduling.Scorer = (*PrefixCache)(nil)
	_ plugins.Consumer  = (*PrefixCache)(nil)
)

// SetDefaults sets the defaults.
func (s *PrefixCache) SetDefaults() {
	s.PrefixMatchInfoProducerName = scheduling.DefaultPrefixProducer
	s.MatchLengthScaleTokens = 8192
}

// Validate checks the weight and scale.
func (s *PrefixCache) Validate() error {
	if !(s.MatchLengthWeight >= 0 && s.MatchLengthWeight <= 1) {
		return errors.New("matchLengthWeight: must be within 0..1")
	}
	if s.MatchLengthScaleTokens <= 0 {
		return errors.New("matchLengthScaleTokens: must be > 0")
	}
	return nil
}

// Consumes returns the producer's PrefixMatch key.
func (s *PrefixCache) Consumes() []plugins.AnyKey {
	return []plugins.AnyKey{s.key.get(s.PrefixMatchInfoProducerName)}
}

// Score implements scheduling.Scorer. Without a prefix match (producer
// failed, empty prompt) every endpoint scores 0.
func (s *PrefixCache) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	m, ok := plugins.Get(&req.Data, s.key.get(s.PrefixMatchInfoProducerName))
	if !ok || m.TotalBlocks == 0 {
		return
	}
	w, scale := s.MatchLengthWeight, float64(s.MatchLengthScaleTokens)
	if scale <= 0 {
		scale = 8192
	}
	for i, e := range eps {
		matched := m.MatchedFor(e, i)
		score := matched / float64(m.TotalBlocks)
		if w > 0 {
			l := min(1, matched*float64(m.BlockTokens)/scale)
			score = (1-w)*score + w*l*l
		}
		scores[i] = score
	}
}
