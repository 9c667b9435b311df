package inflight_test

import (
	"context"
	"math"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/requestcontrol/producers/inflight"
	"github.com/eppkit/eppkit/scheduling"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

var ctx = context.Background()

func registry() *plugins.Registry {
	r := plugins.NewRegistry()
	plugins.Register[*inflight.Producer](r, "inflight-load-producer", plugins.DefaultFor(scorers.InFlightKey(scorers.DefaultInFlightProducer)))
	return r
}

func TestLifecycle(t *testing.T) {
	pluginstest.TestLifecycle(t, registry(), "inflight-load-producer")
	if _, err := registry().Build("inflight-load-producer", "x", []byte(`{"releaseTokensOn":"never"}`)); err == nil {
		t.Error("bad releaseTokensOn accepted")
	}
}

func pickResult(e *scheduling.Endpoint) *scheduling.Result {
	return &scheduling.Result{Primary: "d", Profiles: []scheduling.ProfileResult{{Profile: "d", Endpoints: []*scheduling.Endpoint{e}}}}
}

// TestFeedsTheScorers: the producer's counts reach the active-request and
// token-load scorers through the request's data.
func TestFeedsTheScorers(t *testing.T) {
	p := pluginstest.Build[*inflight.Producer](t, registry(), "inflight-load-producer", "")
	eps := Eps(Ep("a"), Ep("b"), Ep("c"))
	var open []*scheduling.Request
	for _, n := range []int{0, 0, 0, 1} { // three on a, one on b
		req := Req("m").Prompt(string(make([]byte, 400))).Build() // 100 tokens
		if err := p.Produce(ctx, req, eps); err != nil {
			t.Fatal(err)
		}
		p.PreRequest(ctx, req, pickResult(eps[n]))
		open = append(open, req)
	}
	req := Req("m").Prompt("abcd").Build()
	if err := p.Produce(ctx, req, eps); err != nil {
		t.Fatal(err)
	}
	active := &scorers.ActiveRequest{}
	active.SetDefaults()
	if got := Score(active, req, eps...); got[0] != 0 || got[1] != 2.0/3 || got[2] != 1 {
		t.Errorf("active-request scores %v", got)
	}
	tl := &scorers.TokenLoad{QueueThresholdTokens: 1000}
	tl.SetDefaults()
	tl.QueueThresholdTokens = 1000
	if got := Score(tl, req, eps...); !near(got[0], 1-301.0/1000) || !near(got[1], 1-101.0/1000) || !near(got[2], 1-1.0/1000) {
		t.Errorf("token-load scores %v", got)
	}
	// First chunk releases the tokens, completion the request.
	for _, r := range open {
		p.ResponseChunk(ctx, r, nil, []byte("x"))
	}
	if n, tok := p.Tracker().InFlight(eps[0]); n != 3 || tok != 0 {
		t.Errorf("after first chunks: %d %d", n, tok)
	}
	for _, r := range open {
		p.ResponseComplete(ctx, r, nil, parsers.Usage{}, nil)
		p.ResponseComplete(ctx, r, nil, parsers.Usage{}, nil)
	}
	if n, _ := p.Tracker().InFlight(eps[0]); n != 0 {
		t.Errorf("after completion: %d", n)
	}
	p.EndpointRemoved(eps[0])
}

func TestReleaseOnCompletion(t *testing.T) {
	p := pluginstest.Build[*inflight.Producer](t, registry(), "inflight-load-producer", `{"releaseTokensOn":"completion"}`)
	e := Ep("a").Build()
	req := Req("m").Prompt("abcdabcd").Build()
	p.PreRequest(ctx, req, pickResult(e))
	p.ResponseChunk(ctx, req, e, []byte("x"))
	if _, tok := p.Tracker().InFlight(e); tok != 2 {
		t.Errorf("tokens released early: %d", tok)
	}
	p.ResponseComplete(ctx, req, e, parsers.Usage{}, nil)
	if n, tok := p.Tracker().InFlight(e); n != 0 || tok != 0 {
		t.Errorf("after completion %d %d", n, tok)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
