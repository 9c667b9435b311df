package filters_test

import (
	"testing"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/filters"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func TestPrefixAffinityFilter(t *testing.T) {
	eps := Eps(Ep("a"), Ep("b"), Ep("c"), Ep("d"))
	f := pluginstest.Build[*filters.PrefixAffinity](t, std.Registry(), "prefix-cache-affinity-filter", "")
	req := func(matched ...float64) *scheduling.Request {
		r := Req("m").Build()
		plugins.Set(&r.Data, scheduling.PrefixMatchKey(scheduling.DefaultPrefixProducer),
			&scheduling.PrefixMatch{TotalBlocks: 10, BlockTokens: 64, Endpoints: eps, Matched: matched})
		return r
	}
	cases := []struct {
		matched []float64
		want    []string
	}{
		{[]float64{9, 10, 3, 0}, []string{"a", "b"}}, // best 1.0: keep ≥ 0.9
		{[]float64{6, 4, 6, 0}, []string{"a", "c"}},  // best 0.6 ≥ 0.5: keep ≥ 0.5
		{[]float64{4, 4, 1, 0}, []string{"a", "b", "c", "d"}},
		{[]float64{0, 0, 0, 0}, []string{"a", "b", "c", "d"}},
	}
	for _, c := range cases {
		got := Names(Filter(f, req(c.matched...), eps...))
		if len(got) != len(c.want) {
			t.Errorf("%v: kept %v, want %v", c.matched, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%v: kept %v, want %v", c.matched, got, c.want)
			}
		}
	}
	// No prefix data: keep everything.
	if got := Filter(f, Req("m").Build(), eps...); len(got) != 4 {
		t.Fatalf("no data kept %d", len(got))
	}
	for _, bad := range []string{`{"affinityThreshold": 2}`, `{"tolerance": -1}`} {
		if _, err := std.Registry().Build("prefix-cache-affinity-filter", "f", []byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	TestFilter(t, func() scheduling.Filter { return &filters.PrefixAffinity{} })
}
