package customplugins_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/examples/customplugins"
	"github.com/eppkit/eppkit/flowcontrol/flowcontroltest"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
)

// registry is std.Registry plus this package's types, one line each.
func registry() *plugins.Registry {
	reg := std.Registry()
	plugins.Register[*customplugins.FreshMetrics](reg, "fresh-metrics-filter", plugins.Category("filter"))
	plugins.Register[*customplugins.PromptTokens](reg, "prompt-tokens-producer", plugins.Category("producer"),
		plugins.DefaultFor(customplugins.PromptTokensKey))
	plugins.Register[*customplugins.KVHeadroom](reg, "kv-headroom-scorer", plugins.Category("scorer"))
	plugins.Register[*customplugins.SmallestFirst](reg, "smallest-first-ordering-policy", plugins.Category("ordering-policy"))
	return reg
}

func TestLifecycle(t *testing.T) {
	reg := registry()
	for _, typ := range []string{"fresh-metrics-filter", "prompt-tokens-producer", "kv-headroom-scorer", "smallest-first-ordering-policy"} {
		t.Run(typ, func(t *testing.T) { pluginstest.TestLifecycle(t, reg, typ) })
	}
}

func TestFreshMetrics(t *testing.T) {
	TestFilter(t, func() scheduling.Filter { return &customplugins.FreshMetrics{MaxAge: plugins.Duration(time.Second)} })

	// Built as a configuration builds it, with a clock the test moves.
	reg := registry()
	f := pluginstest.Build[*customplugins.FreshMetrics](t, reg, "fresh-metrics-filter", `{"maxAge": "500ms"}`)
	clock := pluginstest.NewClock(ScrapeTime.Add(400 * time.Millisecond))
	if err := f.Init(t.Context(), plugins.Deps{Clock: clock}); err != nil {
		t.Fatal(err)
	}
	eps := Eps(Ep("fresh"), Ep("old").UpdatedAt(ScrapeTime.Add(-200*time.Millisecond)), Ep("never").NoMetrics())
	if got := Names(Filter(f, nil, eps...)); strings.Join(got, ",") != "fresh" {
		t.Errorf("kept %v, want [fresh]", got)
	}
	clock.Advance(time.Second) // now nothing is fresh: keep everything
	if got := Filter(f, nil, eps...); len(got) != 3 {
		t.Errorf("kept %v, want all three", Names(got))
	}
	if _, err := reg.Build("fresh-metrics-filter", "f", []byte(`{"maxAge": "0s"}`)); err == nil {
		t.Error("maxAge 0 was accepted")
	}
}

func TestKVHeadroom(t *testing.T) {
	TestScorer(t, func() scheduling.Scorer { return &customplugins.KVHeadroom{} })

	req := Req("m").Prompt(strings.Repeat("abcd", 2000)).Build() // 2,000 tokens
	if err := (&customplugins.PromptTokens{}).Produce(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	eps := Eps(
		Ep("roomy").Blocks(16, 1000).KV(0.5),  // 8,000 free tokens
		Ep("tight").Blocks(16, 1000).KV(0.95), // 800
		Ep("unknown").KV(0),                   // no cache size reported
	)
	got := Score(&customplugins.KVHeadroom{}, req, eps...)
	if want := []float64{1, 0.4, 0}; got[0] != want[0] || got[2] != want[2] || got[1] < 0.399 || got[1] > 0.401 {
		t.Errorf("scores %v, want %v", got, want)
	}
	if err := (&customplugins.PromptTokens{}).Produce(t.Context(), Req("m").Build(), nil); err == nil {
		t.Error("a request without a body produced a length")
	}
}

func TestSmallestFirst(t *testing.T) {
	flowcontroltest.TestOrdering(t, &customplugins.SmallestFirst{})
}
