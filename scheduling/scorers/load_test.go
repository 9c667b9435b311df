package scorers_test

import (
	"context"
	"math"
	"net/http"
	"testing"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/scheduling"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// fakeInFlight reports fixed loads by endpoint name.
type fakeInFlight map[string][2]int64

func (f fakeInFlight) InFlight(e *scheduling.Endpoint) (int64, int64) {
	l := f[e.Name]
	return l[0], l[1]
}

func withInFlight(f fakeInFlight) func(*scheduling.Request) {
	return func(r *scheduling.Request) {
		plugins.Set[scorers.InFlightSource](&r.Data, scorers.InFlightKey(scorers.DefaultInFlightProducer), f)
	}
}

func loadRegistry() *plugins.Registry {
	r := plugins.NewRegistry()
	plugins.Register[*scorers.ActiveRequest](r, "active-request-scorer")
	plugins.Register[*scorers.TokenLoad](r, "token-load-scorer")
	plugins.Register[*scorers.SessionAffinity](r, "session-affinity-scorer")
	return r
}

func TestLoadScorersLifecycle(t *testing.T) {
	for _, typ := range []string{"active-request-scorer", "token-load-scorer", "session-affinity-scorer"} {
		t.Run(typ, func(t *testing.T) { pluginstest.TestLifecycle(t, loadRegistry(), typ) })
	}
	for _, c := range []struct{ typ, params string }{
		{"active-request-scorer", `{"maxBusyScore":2}`},
		{"active-request-scorer", `{"idleThreshold":-1}`},
		{"token-load-scorer", `{"queueThresholdTokens":0}`},
		{"session-affinity-scorer", `{"headerName":" "}`},
	} {
		if _, err := loadRegistry().Build(c.typ, c.typ, []byte(c.params)); err == nil {
			t.Errorf("%s %s accepted", c.typ, c.params)
		}
	}
}

func TestLoadScorersConformance(t *testing.T) {
	TestScorer(t, func() scheduling.Scorer { s := &scorers.ActiveRequest{}; s.SetDefaults(); return s })
	TestScorer(t, func() scheduling.Scorer { return &scorers.ActiveRequest{} })
	TestScorer(t, func() scheduling.Scorer { s := &scorers.TokenLoad{}; s.SetDefaults(); return s })
	TestScorer(t, func() scheduling.Scorer { return &scorers.TokenLoad{} })
	TestScorer(t, func() scheduling.Scorer { s := &scorers.SessionAffinity{}; s.SetDefaults(); return s })
}

func TestActiveRequest(t *testing.T) {
	load := fakeInFlight{"a": {0, 0}, "b": {2, 0}, "c": {4, 0}, "d": {1, 0}}
	eps := Eps(Ep("a"), Ep("b"), Ep("c"), Ep("d"))
	req := Req("m").With(withInFlight(load)).Build()
	s := pluginstest.Build[*scorers.ActiveRequest](t, loadRegistry(), "active-request-scorer", "")
	if got := Score(s, req, eps...); !nearAll(got, []float64{1, 0.5, 0, 0.75}) {
		t.Errorf("default: %v", got)
	}
	s = pluginstest.Build[*scorers.ActiveRequest](t, loadRegistry(), "active-request-scorer", `{"idleThreshold":1,"maxBusyScore":0.5}`)
	if got := Score(s, req, eps...); !nearAll(got, []float64{1, 0.25, 0, 1}) {
		t.Errorf("idle threshold and busy cap: %v", got)
	}
	if got := Score(s, Req("m").Build(), eps...); !nearAll(got, []float64{1, 1, 1, 1}) {
		t.Errorf("no data: %v", got)
	}
}

func TestTokenLoad(t *testing.T) {
	load := fakeInFlight{"a": {1, 1000}, "b": {1, 0}}
	eps := Eps(Ep("a"), Ep("b"))
	s := pluginstest.Build[*scorers.TokenLoad](t, loadRegistry(), "token-load-scorer", `{"queueThresholdTokens":2000}`)
	// 400 prompt bytes = 100 tokens.
	req := Req("m").Prompt(string(make([]byte, 400))).With(withInFlight(load)).Build()
	if got := Score(s, req, eps...); !nearAll(got, []float64{1 - 1100.0/2000, 1 - 100.0/2000}) {
		t.Errorf("scores %v", got)
	}
	// A prefix match on b discounts its cached tokens (64 tokens per block).
	req = Req("m").Prompt(string(make([]byte, 400))).With(withInFlight(load)).With(func(r *scheduling.Request) {
		plugins.Set(&r.Data, scheduling.PrefixMatchKey(scheduling.DefaultPrefixProducer),
			&scheduling.PrefixMatch{TotalBlocks: 2, BlockTokens: 64, Endpoints: eps, Matched: []float64{0, 1}})
	}).Build()
	if got := Score(s, req, eps...); !nearAll(got, []float64{1 - 1100.0/2000, 1 - 36.0/2000}) {
		t.Errorf("with prefix: %v", got)
	}
	over := fakeInFlight{"a": {1, 1 << 40}}
	if got := Score(s, Req("m").With(withInFlight(over)).Build(), eps...); got[0] != 0 {
		t.Errorf("over the threshold: %v", got)
	}
}

func TestSessionAffinity(t *testing.T) {
	eps := Eps(Ep("a"), Ep("b"))
	s := pluginstest.Build[*scorers.SessionAffinity](t, loadRegistry(), "session-affinity-scorer", "")
	req := Req("m").Header("X-Session-Token", scorers.SessionToken(eps[1])).Build()
	if got := Score(s, req, eps...); !nearAll(got, []float64{0, 1}) {
		t.Errorf("scores %v", got)
	}
	for _, tok := range []string{"", "!!!not base64", scorers.SessionToken(Ep("gone").Build())} {
		if got := Score(s, Req("m").Header("x-session-token", tok).Build(), eps...); !nearAll(got, []float64{0, 0}) {
			t.Errorf("token %q: %v", tok, got)
		}
	}
	h := http.Header{}
	s.ResponseHeader(context.Background(), req, eps[0], h)
	if h.Get("X-Session-Token") != scorers.SessionToken(eps[0]) {
		t.Errorf("written back: %v", h)
	}
	s.ResponseHeader(context.Background(), req, nil, http.Header{})
	c := pluginstest.Build[*scorers.SessionAffinity](t, loadRegistry(), "session-affinity-scorer", `{"headerName":"X-Affinity"}`)
	if got := Score(c, Req("m").Header("x-affinity", scorers.SessionToken(eps[0])).Build(), eps...); !nearAll(got, []float64{1, 0}) {
		t.Errorf("custom header: %v", got)
	}
}

func nearAll(a, b []float64) bool {
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
