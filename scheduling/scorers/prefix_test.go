package scorers_test

import (
	"context"
	"math"
	"testing"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// withMatch returns a request carrying a prefix match of total blocks of
// blockTokens, matched[i] for eps[i], from the named producer.
func withMatch(producer string, eps []*scheduling.Endpoint, total, blockTokens int, matched ...float64) *scheduling.Request {
	req := Req("m").Build()
	plugins.Set(&req.Data, scheduling.PrefixMatchKey(producer), &scheduling.PrefixMatch{
		TotalBlocks: total, BlockTokens: blockTokens, Endpoints: eps, Matched: matched,
	})
	return req
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

func TestPrefixCacheScorer(t *testing.T) {
	eps := Eps(Ep("a"), Ep("b"), Ep("c"))
	req := withMatch(scheduling.DefaultPrefixProducer, eps, 20, 64, 20, 5, 0)
	s := pluginstest.Build[*scorers.PrefixCache](t, std.Registry(), "prefix-cache-scorer", "")
	if got := Score(s, req, eps...); !near(got, []float64{1, 0.25, 0}) {
		t.Fatalf("ratio scores %v", got)
	}
	// matchLengthWeight 0.5, scale 640 tokens: b matched 5×64 = 320 tokens →
	// 0.5·0.25 + 0.5·(320/640)² = 0.25; a: 0.5 + 0.5·1 = 1.
	s = pluginstest.Build[*scorers.PrefixCache](t, std.Registry(), "prefix-cache-scorer", `{"matchLengthWeight": 0.5, "matchLengthScaleTokens": 640}`)
	if got := Score(s, req, eps...); !near(got, []float64{1, 0.25, 0}) {
		t.Fatalf("match-length scores %v", got)
	}
	// A filter removed a: scores follow the endpoints, not positions.
	if got := Score(s, req, eps[1], eps[2]); !near(got, []float64{0.25, 0}) {
		t.Fatalf("after filtering: %v", got)
	}
	// Another producer's match is not read.
	s = pluginstest.Build[*scorers.PrefixCache](t, std.Registry(), "prefix-cache-scorer", `{"prefixMatchInfoProducerName": "precise"}`)
	if got := Score(s, req, eps...); !near(got, []float64{0, 0, 0}) {
		t.Fatalf("wrong producer: %v", got)
	}
	if k := s.Consumes()[0].KeyName(); k != "prefix-match/precise" {
		t.Fatalf("consumes %s", k)
	}
	req = withMatch("precise", eps, 4, 16, 3.2, 0, 4)
	if got := Score(s, req, eps...); !near(got, []float64{0.8, 0, 1}) {
		t.Fatalf("tier-weighted: %v", got)
	}
	for _, bad := range []string{`{"matchLengthWeight": 1.5}`, `{"matchLengthWeight": -0.1}`, `{"matchLengthScaleTokens": 0}`} {
		if _, err := std.Registry().Build("prefix-cache-scorer", "p", []byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestNoHitLRUScorer(t *testing.T) {
	eps := Eps(Ep("a"), Ep("b"), Ep("c"))
	s := pluginstest.Build[*scorers.NoHitLRU](t, std.Registry(), "no-hit-lru-scorer", "")
	cold := func() *scheduling.Request { return withMatch(scheduling.DefaultPrefixProducer, eps, 4, 64, 0, 0, 0) }
	score := func(req *scheduling.Request) []float64 {
		scores := make([]float64, len(eps))
		s.Score(context.Background(), req, eps, scores)
		return scores
	}
	pickOn := func(req *scheduling.Request, e *scheduling.Endpoint) {
		s.PreRequest(context.Background(), req, &scheduling.Result{Primary: "p", Profiles: []scheduling.ProfileResult{{Profile: "p", Endpoints: []*scheduling.Endpoint{e}}}})
	}
	r := cold()
	if got := score(r); !near(got, []float64{1, 0.5, 0}) {
		t.Fatalf("never used: %v", got)
	}
	pickOn(r, eps[0])
	r = cold()
	if got := score(r); !near(got, []float64{0, 1, 0.5}) {
		t.Fatalf("after a: %v (b, c never used; a most recent)", got)
	}
	pickOn(r, eps[1])
	r = cold()
	if got := score(r); !near(got, []float64{0.5, 0, 1}) {
		t.Fatalf("after a, b: %v", got)
	}
	// A warm request scores neutral and does not move the LRU.
	warm := withMatch(scheduling.DefaultPrefixProducer, eps, 4, 64, 0, 2, 0)
	if got := score(warm); !near(got, []float64{0.5, 0.5, 0.5}) {
		t.Fatalf("warm: %v", got)
	}
	pickOn(warm, eps[2])
	if got := score(cold()); !near(got, []float64{0.5, 0, 1}) {
		t.Fatalf("a warm pick moved the LRU: %v", got)
	}
	// A removed endpoint ranks as never used again.
	s.EndpointRemoved(eps[0])
	if got := score(cold()); !near(got, []float64{1, 0, 0.5}) {
		t.Fatalf("after removing a: %v", got)
	}
}

func TestNoHitLRUSizeBound(t *testing.T) {
	s := pluginstest.Build[*scorers.NoHitLRU](t, std.Registry(), "no-hit-lru-scorer", `{"lruSize": 2}`)
	eps := Eps(Ep("a"), Ep("b"), Ep("c"))
	for _, e := range eps {
		req := withMatch(scheduling.DefaultPrefixProducer, eps, 1, 64, 0, 0, 0)
		s.Score(context.Background(), req, eps, make([]float64, 3))
		s.PreRequest(context.Background(), req, &scheduling.Result{Primary: "p", Profiles: []scheduling.ProfileResult{{Profile: "p", Endpoints: []*scheduling.Endpoint{e}}}})
	}
	// a was forgotten: it ranks as never used, ahead of b and c.
	scores := make([]float64, 3)
	s.Score(context.Background(), withMatch(scheduling.DefaultPrefixProducer, eps, 1, 64, 0, 0, 0), eps, scores)
	if !near(scores, []float64{1, 0.5, 0}) {
		t.Fatalf("scores %v", scores)
	}
}
