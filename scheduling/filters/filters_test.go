package filters_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/filters"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func labelled() []*scheduling.Endpoint {
	return Eps(
		Ep("a").Label("role", "decode").Label("zone", "us-east"),
		Ep("b").Label("role", "prefill").Label("zone", "us-west"),
		Ep("c").Label("role", "decode"),
		Ep("d"),
	)
}

func TestLabelSelector(t *testing.T) {
	cases := []struct {
		name string
		sel  filters.LabelSelector
		want []string
	}{
		{"empty selector", filters.LabelSelector{}, []string{"a", "b", "c", "d"}},
		{"matchLabels", filters.LabelSelector{MatchLabels: map[string]string{"role": "decode"}}, []string{"a", "c"}},
		{"matchLabels all", filters.LabelSelector{MatchLabels: map[string]string{"role": "decode", "zone": "us-east"}}, []string{"a"}},
		{"matchLabels none", filters.LabelSelector{MatchLabels: map[string]string{"role": "router"}}, []string{}},
		{"In", expr("zone", filters.In, "us-east", "us-west"), []string{"a", "b"}},
		{"NotIn includes unlabelled", expr("role", filters.NotIn, "prefill"), []string{"a", "c", "d"}},
		{"Exists", expr("zone", filters.Exists), []string{"a", "b"}},
		{"DoesNotExist", expr("zone", filters.DoesNotExist), []string{"c", "d"}},
		{
			"labels and expressions together",
			filters.LabelSelector{
				MatchLabels:      map[string]string{"role": "decode"},
				MatchExpressions: []filters.LabelRequirement{{Key: "zone", Operator: filters.DoesNotExist}},
			},
			[]string{"c"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.sel.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			for _, init := range []bool{false, true} {
				sel := &filters.LabelSelector{MatchLabels: tc.sel.MatchLabels, MatchExpressions: tc.sel.MatchExpressions}
				if init {
					if err := sel.Init(context.Background(), plugins.Deps{}); err != nil {
						t.Fatal(err)
					}
				}
				eps := labelled()
				got := Filter(sel, nil, eps...)
				if names := Names(got); !slices.Equal(names, tc.want) {
					t.Errorf("init %v: kept %v, want %v", init, names, tc.want)
				}
				if len(got) == len(eps) && &got[0] != &eps[0] {
					t.Errorf("init %v: kept every endpoint but did not return the input slice", init)
				}
			}
		})
	}
}

func expr(key string, op filters.Operator, values ...string) filters.LabelSelector {
	return filters.LabelSelector{MatchExpressions: []filters.LabelRequirement{{Key: key, Operator: op, Values: values}}}
}

func TestLabelSelectorValidate(t *testing.T) {
	reg := plugins.NewRegistry()
	plugins.Register[*filters.LabelSelector](reg, "label-selector-filter")
	cases := []struct{ params, wantErr string }{
		{`{"matchExpressions": [{"key": "role", "operator": "Equals", "values": ["x"]}]}`, `matchExpressions[0].operator: unknown operator "Equals"`},
		{`{"matchExpressions": [{"key": "role", "operator": "in", "values": ["x"]}]}`, `unknown operator "in"`},
		{`{"matchExpressions": [{"key": "role", "operator": ""}]}`, `unknown operator ""`},
		{`{"matchExpressions": [{"key": "role", "operator": "In"}]}`, `matchExpressions[0].values: operator In needs at least one value`},
		{`{"matchExpressions": [{"key": "role", "operator": "NotIn", "values": []}]}`, `operator NotIn needs at least one value`},
		{`{"matchExpressions": [{"key": "zone", "operator": "Exists"}, {"key": "role", "operator": "Exists", "values": ["x"]}]}`, `matchExpressions[1].values: operator Exists takes no values`},
		{`{"matchExpressions": [{"key": "role", "operator": "DoesNotExist", "values": ["x"]}]}`, `operator DoesNotExist takes no values`},
		{`{"matchExpressions": [{"operator": "Exists"}]}`, `matchExpressions[0].key: must not be empty`},
		{`{"matchLabels": {"": "x"}}`, `matchLabels: empty label name`},
		{`{"matchExpressions": [{"key": "role", "operator": "In", "values": ["x"], "extra": 1}]}`, `unknown field "extra"`},
	}
	for _, tc := range cases {
		_, err := reg.Build("label-selector-filter", "sel", []byte(tc.params))
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("params %s: error %v, want one containing %q", tc.params, err, tc.wantErr)
		}
	}
	sel := pluginstest.Build[*filters.LabelSelector](t, reg, "label-selector-filter",
		`{"matchLabels": {"role": "decode"}, "matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-east"]}]}`)
	if got := Names(Filter(sel, nil, labelled()...)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("kept %v, want [a]", got)
	}
}

func TestLoRAAffinity(t *testing.T) {
	sql := Req("base").Target("sql").Build()
	cases := []struct {
		name      string
		threshold float64
		eps       []*EndpointBuilder
		want      []string
	}{
		{
			name:      "affinity chosen at threshold 1",
			threshold: 1,
			eps: []*EndpointBuilder{
				Ep("active").LoRA([]string{"sql"}, nil, 2),
				Ep("waiting").LoRA([]string{"x", "y"}, []string{"sql"}, 2),
				Ep("slot").LoRA(nil, nil, 2),
				Ep("full").LoRA([]string{"x", "y"}, nil, 2),
			},
			want: []string{"active", "waiting"},
		},
		{
			name:      "available chosen at threshold 0",
			threshold: 0,
			eps: []*EndpointBuilder{
				Ep("active").LoRA([]string{"sql"}, nil, 2),
				Ep("slot").LoRA(nil, nil, 2),
				Ep("full").LoRA([]string{"x", "y"}, nil, 2),
				Ep("slot2").LoRA([]string{"x"}, []string{"x"}, 2), // x counts once
			},
			want: []string{"slot", "slot2"},
		},
		{
			name:      "only affinity",
			threshold: 0,
			eps:       []*EndpointBuilder{Ep("active").LoRA([]string{"sql"}, nil, 1), Ep("full").LoRA([]string{"x"}, nil, 1)},
			want:      []string{"active"},
		},
		{
			name:      "only available",
			threshold: 1,
			eps:       []*EndpointBuilder{Ep("slot").LoRA([]string{"x"}, nil, 2), Ep("full").LoRA([]string{"x"}, nil, 1)},
			want:      []string{"slot"},
		},
		{
			name:      "neither: keep everything",
			threshold: 1,
			eps:       []*EndpointBuilder{Ep("full").LoRA([]string{"x"}, nil, 1), Ep("no-lora"), Ep("unusable").NoMetrics()},
			want:      []string{"full", "no-lora", "unusable"},
		},
		{
			name:      "unusable metrics are in neither group",
			threshold: 1,
			eps:       []*EndpointBuilder{Ep("stale").NoMetrics().LoRA([]string{"sql"}, nil, 2), Ep("nan").KV(math.NaN()).LoRA([]string{"sql"}, nil, 2), Ep("slot").LoRA(nil, nil, 1)},
			want:      []string{"slot"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &filters.LoRAAffinity{Threshold: tc.threshold}
			if got := Names(Filter(f, sql, Eps(tc.eps...)...)); !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLoRAAffinityDistribution checks the share of requests sent to the
// affinity group follows the threshold, and that a seed fixes the sequence.
func TestLoRAAffinityDistribution(t *testing.T) {
	eps := Eps(Ep("active").LoRA([]string{"sql"}, nil, 2), Ep("slot").LoRA(nil, nil, 2))
	req := Req("base").Target("sql").Build()
	run := func(seed uint64, threshold float64) (affinity int, seq []string) {
		f := &filters.LoRAAffinity{Threshold: threshold}
		if err := f.Init(context.Background(), plugins.Deps{Rand: plugins.NewRand(seed)}); err != nil {
			t.Fatal(err)
		}
		for range 4000 {
			got := Filter(f, req, eps...)
			if len(got) != 1 {
				t.Fatalf("kept %v, want one group", Names(got))
			}
			if got[0].Name == "active" {
				affinity++
			}
			seq = append(seq, got[0].Name)
		}
		return affinity, seq
	}
	n, seq1 := run(7, 0.75)
	if share := float64(n) / 4000; math.Abs(share-0.75) > 0.03 {
		t.Errorf("affinity share %.3f, want 0.75 ± 0.03", share)
	}
	if _, seq2 := run(7, 0.75); !slices.Equal(seq1, seq2) {
		t.Error("same seed, different sequence")
	}
	if n, _ := run(7, filters.DefaultLoRAAffinityThreshold); n < 3980 {
		t.Errorf("default threshold: %d/4000 to the affinity group, want ≥ 3980", n)
	}
}

func TestLoRAAffinityParameters(t *testing.T) {
	reg := plugins.NewRegistry()
	plugins.Register[*filters.LoRAAffinity](reg, "lora-affinity-filter")
	if f := pluginstest.Build[*filters.LoRAAffinity](t, reg, "lora-affinity-filter", ""); f.Threshold != 0.999 {
		t.Errorf("default threshold = %v, want 0.999", f.Threshold)
	}
	for _, bad := range []string{`{"threshold": -0.1}`, `{"threshold": 1.01}`, `{"threshold": "high"}`} {
		if _, err := reg.Build("lora-affinity-filter", "f", []byte(bad)); err == nil {
			t.Errorf("parameters %s: no error", bad)
		}
	}
}

func TestConformance(t *testing.T) {
	TestFilter(t, func() scheduling.Filter { return &filters.LabelSelector{} })
	TestFilter(t, func() scheduling.Filter {
		return &filters.LabelSelector{
			MatchLabels:      map[string]string{"role": "decode"},
			MatchExpressions: []filters.LabelRequirement{{Key: "zone", Operator: filters.NotIn, Values: []string{"x"}}},
		}
	})
	TestFilter(t, func() scheduling.Filter { return &filters.LoRAAffinity{Threshold: 0.5} })
}

func TestKeepAllDoesNotAllocate(t *testing.T) {
	eps := benchEndpoints(64)
	req := Req("base").Target("sql").Build()
	for _, tc := range []struct {
		name string
		f    scheduling.Filter
	}{
		{"label-selector", &filters.LabelSelector{MatchLabels: map[string]string{"pool": "p"}, MatchExpressions: []filters.LabelRequirement{{Key: "role", Operator: filters.In, Values: []string{"decode", "both"}}}}},
		{"lora-affinity", &filters.LoRAAffinity{Threshold: 1}},
	} {
		if err := plugins.Init(context.Background(), tc.f, plugins.Deps{}.WithDefaults()); err != nil {
			t.Fatal(err)
		}
		var got []*scheduling.Endpoint
		if n := testing.AllocsPerRun(100, func() { got = tc.f.Filter(context.Background(), req, eps) }); n != 0 {
			t.Errorf("%s: %v allocations keeping every endpoint, want 0", tc.name, n)
		}
		if len(got) != len(eps) {
			t.Errorf("%s: kept %d of %d", tc.name, len(got), len(eps))
		}
	}
}

// benchEndpoints are n endpoints all matching pool=p, role in (decode, both),
// all with the sql adapter active.
func benchEndpoints(n int) []*scheduling.Endpoint {
	bs := make([]*EndpointBuilder, n)
	for i := range bs {
		role := []string{"decode", "both"}[i%2]
		bs[i] = Ep(fmt.Sprintf("ep-%d", i)).Label("pool", "p").Label("role", role).LoRA([]string{"sql"}, nil, 4)
	}
	return Eps(bs...)
}

func BenchmarkFilter(b *testing.B) {
	for _, tc := range []struct {
		name string
		f    scheduling.Filter
	}{
		{"label-selector-filter", &filters.LabelSelector{MatchLabels: map[string]string{"pool": "p"}, MatchExpressions: []filters.LabelRequirement{{Key: "role", Operator: filters.In, Values: []string{"decode"}}}}},
		{"lora-affinity-filter", &filters.LoRAAffinity{Threshold: 1}},
	} {
		for _, n := range []int{8, 64, 256} {
			b.Run(fmt.Sprintf("%s/N=%d", tc.name, n), func(b *testing.B) {
				if err := plugins.Init(context.Background(), tc.f, plugins.Deps{}.WithDefaults()); err != nil {
					b.Fatal(err)
				}
				eps, req := benchEndpoints(n), Req("base").Target("sql").Build()
				b.ReportAllocs()
				for b.Loop() {
					tc.f.Filter(context.Background(), req, eps)
				}
			})
		}
	}
}
