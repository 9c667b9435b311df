package scheduling

import "github.com/eppkit/eppkit/plugins"

// PrefixMatch is what a prefix-cache producer found for one request: how
// many of the request's blocks each candidate endpoint holds, counted as the
// run of consecutive blocks from block 0. Producers write it under
// PrefixMatchKey(producerName); prefix scorers and filters read it.
type PrefixMatch struct {
	TotalBlocks int      // blocks in the request's prompt
	BlockTokens int      // tokens per block
	Blocks      []uint64 // the request's block keys in order, when the producer has them
	// Endpoints are the candidates the producer saw; Matched[i] is the
	// (possibly tier-weighted) number of blocks Endpoints[i] holds.
	Endpoints []*Endpoint
	Matched   []float64
}

// MatchedFor returns the matched blocks of e, which is the i-th endpoint of
// the slice the caller is scoring. When no filter removed endpoints this is
// an index hit; otherwise it searches the producer's candidates.
func (m *PrefixMatch) MatchedFor(e *Endpoint, i int) float64 {
	if i < len(m.Endpoints) && m.Endpoints[i] == e {
		return m.Matched[i]
	}
	for j, c := range m.Endpoints {
		if c == e {
			return m.Matched[j]
		}
	}
	return 0
}

// Ratio returns MatchedFor(e, i) / TotalBlocks (0 for an empty prompt).
func (m *PrefixMatch) Ratio(e *Endpoint, i int) float64 {
	if m.TotalBlocks == 0 {
		return 0
	}
	return m.MatchedFor(e, i) / float64(m.TotalBlocks)
}

// Cold reports whether no candidate holds any of the request's blocks.
func (m *PrefixMatch) Cold() bool {
	for _, v := range m.Matched {
		if v > 0 {
			return false
		}
	}
	return true
}

// DefaultPrefixProducer is the instance name (and type) of the approximate
// prefix producer the graph auto-creates when a prefix consumer needs one.
const DefaultPrefixProducer = "approx-prefix-cache-producer"

// PrefixMatchKey is the data key under which the named producer writes its
// *PrefixMatch.
func PrefixMatchKey(producer string) plugins.Key[*PrefixMatch] {
	return plugins.NewKey[*PrefixMatch]("prefix-match/" + producer)
}
