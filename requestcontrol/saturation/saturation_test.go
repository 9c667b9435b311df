package saturation_test

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/requestcontrol/saturation"
	"github.com/eppkit/eppkit/scheduling"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
)

var ctx = context.Background()

func registry() *plugins.Registry {
	r := plugins.NewRegistry()
	plugins.Register[*saturation.Utilization](r, "utilization-detector")
	plugins.Register[*saturation.Concurrency](r, "concurrency-detector")
	return r
}

func TestLifecycle(t *testing.T) {
	for _, typ := range []string{"utilization-detector", "concurrency-detector"} {
		t.Run(typ, func(t *testing.T) { pluginstest.TestLifecycle(t, registry(), typ) })
	}
	for _, c := range []struct{ typ, params string }{
		{"utilization-detector", `{"queueDepthThreshold":0}`},
		{"utilization-detector", `{"kvCacheUtilThreshold":1.5}`},
		{"utilization-detector", `{"metricsStalenessThreshold":"0s"}`},
		{"utilization-detector", `{"headroom":-1}`},
		{"utilization-detector", `{"stalenessPolicy":"panic"}`},
		{"concurrency-detector", `{"concurrencyMode":"bytes"}`},
		{"concurrency-detector", `{"maxConcurrency":0}`},
		{"concurrency-detector", `{"maxTokenConcurrency":-1}`},
	} {
		if _, err := registry().Build(c.typ, c.typ, []byte(c.params)); err == nil {
			t.Errorf("%s %s: no error", c.typ, c.params)
		}
	}
}

func utilization(t *testing.T, params string) *saturation.Utilization {
	return pluginstest.Build[*saturation.Utilization](t, registry(), "utilization-detector", params)
}

func TestUtilizationSaturation(t *testing.T) {
	u := utilization(t, "")
	stale := ScrapeTime.Add(-time.Second)
	cases := []struct {
		name string
		eps  []*EndpointBuilder
		want float64
	}{
		{"idle", []*EndpointBuilder{Ep("a"), Ep("b")}, 0},
		{"queue bound", []*EndpointBuilder{Ep("a").Waiting(5), Ep("b")}, 0.5},
		{"kv bound", []*EndpointBuilder{Ep("a").KV(0.4).Waiting(1), Ep("b").KV(0.8)}, (0.5 + 1) / 2},
		{"overloaded", []*EndpointBuilder{Ep("a").Waiting(10), Ep("b").Waiting(10)}, 2},
		{"stale counts as saturated", []*EndpointBuilder{Ep("a").UpdatedAt(stale), Ep("b")}, 0.5},
		{"never scraped counts as saturated", []*EndpointBuilder{Ep("a").NoMetrics(), Ep("b")}, 0.5},
		{"empty pool", nil, 1},
	}
	for _, c := range cases {
		if got := u.Saturation(ctx, Eps(c.eps...)); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	ig := utilization(t, `{"stalenessPolicy":"ignore"}`)
	if got := ig.Saturation(ctx, Eps(Ep("a").UpdatedAt(stale), Ep("b").Waiting(5))); got != 1 {
		t.Errorf("ignore: stale endpoint left out: %v", got)
	}
	if got := ig.Saturation(ctx, Eps(Ep("a").NoMetrics())); got != 0 {
		t.Errorf("ignore, all stale: %v", got)
	}
}

func TestUtilizationFilter(t *testing.T) {
	u := utilization(t, `{"headroom":0.2}`) // queue limit 6, kv limit 0.96
	eps := Eps(Ep("ok").Waiting(5).KV(0.9), Ep("queue").Waiting(6), Ep("kv").KV(0.96), Ep("stale").NoMetrics())
	if got := Names(u.Filter(ctx, nil, eps)); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("kept %v", got)
	}
	all := Eps(Ep("a"), Ep("b"))
	if got := u.Filter(ctx, nil, all); &got[0] != &all[0] {
		t.Error("keeping all must return the input slice")
	}
	busy := Eps(Ep("a").Waiting(50), Ep("b").Waiting(60))
	if got := u.Filter(ctx, nil, busy); len(got) != 2 {
		t.Errorf("fail open: %v", Names(got))
	}
	ig := utilization(t, `{"stalenessPolicy":"ignore"}`)
	if got := Names(ig.Filter(ctx, nil, Eps(Ep("stale").NoMetrics(), Ep("busy").Waiting(9)))); !slices.Equal(got, []string{"stale"}) {
		t.Errorf("ignore keeps unjudged stale endpoints: %v", got)
	}
}

func TestFilterConformance(t *testing.T) {
	TestFilter(t, func() scheduling.Filter { u := &saturation.Utilization{}; u.SetDefaults(); return u })
	TestFilter(t, func() scheduling.Filter { c := &saturation.Concurrency{}; c.SetDefaults(); return c })
}

func TestConcurrency(t *testing.T) {
	c := pluginstest.Build[*saturation.Concurrency](t, registry(), "concurrency-detector", `{"maxConcurrency":2,"maxTokenConcurrency":100,"concurrencyMode":"hybrid"}`)
	eps := Eps(Ep("a"), Ep("b"))
	pick := func(e *scheduling.Endpoint, prompt string) *scheduling.Request {
		req := Req("m").Prompt(prompt).Build()
		c.PreRequest(ctx, req, &scheduling.Result{Primary: "p", Profiles: []scheduling.ProfileResult{{Profile: "p", Endpoints: []*scheduling.Endpoint{e}}}})
		return req
	}
	if s := c.Saturation(ctx, eps); s != 0 {
		t.Errorf("idle: %v", s)
	}
	r1 := pick(eps[0], "abcd")                                     // 1 token
	r2 := pick(eps[0], string(make([]byte, 4*150)))                // 150 tokens: over a's token limit
	if s := c.Saturation(ctx, eps); math.Abs(s-151.0/200) > 1e-9 { // tokens 151/200 beat requests 2/4
		t.Errorf("hybrid saturation %v", s)
	}
	if got := Names(c.Filter(ctx, nil, eps)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("filter %v", got)
	}
	c.ResponseComplete(ctx, r2, nil, parsers.Usage{}, nil)
	c.ResponseComplete(ctx, r2, nil, parsers.Usage{}, nil) // idempotent
	c.ResponseComplete(ctx, r1, nil, parsers.Usage{}, nil)
	if s := c.Saturation(ctx, eps); s != 0 {
		t.Errorf("after completion: %v", s)
	}
	if c.Saturation(ctx, nil) != 1 {
		t.Error("an empty pool is saturated")
	}
	c.EndpointRemoved(eps[0])
}
