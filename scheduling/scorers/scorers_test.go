package scorers_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/scheduling"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// stock lists every scorer in the package with a constructor.
var stock = []struct {
	typ string
	new func() scheduling.Scorer
}{
	{"queue-scorer", func() scheduling.Scorer { return &scorers.Queue{} }},
	{"running-requests-size-scorer", func() scheduling.Scorer { return &scorers.RunningRequests{} }},
	{"kv-cache-utilization-scorer", func() scheduling.Scorer { return &scorers.KVCacheUtilization{} }},
	{"lora-affinity-scorer", func() scheduling.Scorer { return &scorers.LoRAAffinity{} }},
	{"load-aware-scorer", func() scheduling.Scorer { s := &scorers.LoadAware{}; s.SetDefaults(); return s }},
	{"load-aware-scorer/zero-value", func() scheduling.Scorer { return &scorers.LoadAware{} }},
	{"prefix-cache-scorer", func() scheduling.Scorer { return &scorers.PrefixCache{} }},
	{"no-hit-lru-scorer", func() scheduling.Scorer { return &scorers.NoHitLRU{} }},
}

type scoreCase struct {
	name string
	req  *scheduling.Request
	eps  []*EndpointBuilder
	want []float64
}

func runScoreCases(t *testing.T, s scheduling.Scorer, cases []scoreCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			if req == nil {
				req = Req("base").Build()
			}
			got := Score(s, req, Eps(tc.eps...)...)
			if !slices.Equal(got, tc.want) {
				t.Errorf("scores = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQueue(t *testing.T) {
	runScoreCases(t, &scorers.Queue{}, []scoreCase{
		{name: "min-max", eps: []*EndpointBuilder{Ep("a").Waiting(0), Ep("b").Waiting(5), Ep("c").Waiting(10)}, want: []float64{1, 0.5, 0}},
		{name: "offset range", eps: []*EndpointBuilder{Ep("a").Waiting(4), Ep("b").Waiting(7), Ep("c").Waiting(8)}, want: []float64{1, 0.25, 0}},
		{name: "all equal", eps: []*EndpointBuilder{Ep("a").Waiting(3), Ep("b").Waiting(3)}, want: []float64{1, 1}},
		{name: "single", eps: []*EndpointBuilder{Ep("a").Waiting(42)}, want: []float64{1}},
		{name: "running ignored", eps: []*EndpointBuilder{Ep("a").Running(9), Ep("b").Running(0)}, want: []float64{1, 1}},
		{
			name: "unusable excluded from min-max",
			eps:  []*EndpointBuilder{Ep("never").NoMetrics(), Ep("nan").Waiting(0).KV(math.NaN()), Ep("a").Waiting(10), Ep("b").Waiting(6), Ep("neg").Waiting(-3)},
			want: []float64{0, 0, 0, 1, 0},
		},
		{name: "one usable", eps: []*EndpointBuilder{Ep("a").NoMetrics(), Ep("b").Waiting(9)}, want: []float64{0, 1}},
		{name: "all unusable", eps: []*EndpointBuilder{Ep("a").NoMetrics(), Ep("b").KV(math.Inf(1))}, want: []float64{0, 0}},
		{name: "empty", eps: nil, want: []float64{}},
	})
}

func TestRunningRequests(t *testing.T) {
	runScoreCases(t, &scorers.RunningRequests{}, []scoreCase{
		{name: "min-max", eps: []*EndpointBuilder{Ep("a").Running(2), Ep("b").Running(4), Ep("c").Running(10)}, want: []float64{1, 0.75, 0}},
		{name: "all equal", eps: []*EndpointBuilder{Ep("a").Running(7), Ep("b").Running(7)}, want: []float64{1, 1}},
		{name: "waiting ignored", eps: []*EndpointBuilder{Ep("a").Waiting(9), Ep("b").Waiting(0)}, want: []float64{1, 1}},
		{name: "unusable", eps: []*EndpointBuilder{Ep("a").Running(-1), Ep("b").Running(1), Ep("c").Running(3)}, want: []float64{0, 1, 0}},
	})
}

func TestKVCacheUtilization(t *testing.T) {
	runScoreCases(t, &scorers.KVCacheUtilization{}, []scoreCase{
		{
			name: "1 − usage",
			eps:  []*EndpointBuilder{Ep("a").KV(0), Ep("b").KV(0.25), Ep("c").KV(0.5), Ep("d").KV(1)},
			want: []float64{1, 0.75, 0.5, 0},
		},
		{name: "over-full", eps: []*EndpointBuilder{Ep("a").KV(1.5)}, want: []float64{0}},
		{
			name: "unusable",
			eps:  []*EndpointBuilder{Ep("a").NoMetrics(), Ep("b").KV(math.NaN()), Ep("c").KV(-0.1), Ep("d").KV(math.Inf(-1))},
			want: []float64{0, 0, 0, 0},
		},
	})
}

func TestLoRAAffinity(t *testing.T) {
	sql := Req("base").Target("sql").Build()
	runScoreCases(t, &scorers.LoRAAffinity{}, []scoreCase{
		{name: "active", req: sql, eps: []*EndpointBuilder{Ep("a").LoRA([]string{"chat", "sql"}, nil, 2)}, want: []float64{1}},
		{name: "active beats full", req: sql, eps: []*EndpointBuilder{Ep("a").LoRA([]string{"sql"}, []string{"x", "y"}, 1)}, want: []float64{1}},
		{name: "free slot", req: sql, eps: []*EndpointBuilder{Ep("a").LoRA([]string{"chat"}, nil, 2)}, want: []float64{0.8}},
		{name: "free slot beats waiting", req: sql, eps: []*EndpointBuilder{Ep("a").LoRA(nil, []string{"sql"}, 2)}, want: []float64{0.8}},
		{name: "waiting, full", req: sql, eps: []*EndpointBuilder{Ep("a").LoRA([]string{"chat"}, []string{"sql"}, 2)}, want: []float64{0.6}},
		{name: "full", req: sql, eps: []*EndpointBuilder{Ep("a").LoRA([]string{"chat", "math"}, nil, 2)}, want: []float64{0}},
		{name: "active+waiting fills slots", req: sql, eps: []*EndpointBuilder{Ep("a").LoRA([]string{"chat"}, []string{"math"}, 2)}, want: []float64{0}},
		{
			name: "adapter in both lists counts once",
			req:  sql,
			eps:  []*EndpointBuilder{Ep("a").LoRA([]string{"chat"}, []string{"chat"}, 2), Ep("b").LoRA([]string{"chat"}, []string{"math", "math"}, 3)},
			want: []float64{0.8, 0.8},
		},
		{name: "no LoRA support", req: sql, eps: []*EndpointBuilder{Ep("a")}, want: []float64{0}},
		{
			name: "mixed",
			req:  sql,
			eps: []*EndpointBuilder{
				Ep("active").LoRA([]string{"sql"}, nil, 1),
				Ep("slot").LoRA(nil, nil, 1),
				Ep("waiting").LoRA([]string{"x"}, []string{"sql"}, 2),
				Ep("full").LoRA([]string{"x"}, nil, 1),
				Ep("unusable").NoMetrics().LoRA([]string{"sql"}, nil, 1),
			},
			want: []float64{1, 0.8, 0.6, 0, 0},
		},
		{
			name: "incoming model when no target",
			req:  &scheduling.Request{IncomingModel: "sql"},
			eps:  []*EndpointBuilder{Ep("a").LoRA([]string{"sql"}, nil, 1)},
			want: []float64{1},
		},
	})
}

func TestLoadAware(t *testing.T) {
	runScoreCases(t, &scorers.LoadAware{Threshold: 128}, []scoreCase{
		{name: "empty queue", eps: []*EndpointBuilder{Ep("a").Waiting(0)}, want: []float64{0.5}},
		{
			name: "0.5·(1 − min(W,T)/T)",
			eps:  []*EndpointBuilder{Ep("a").Waiting(1), Ep("b").Waiting(32), Ep("c").Waiting(64), Ep("d").Waiting(128), Ep("e").Waiting(1000)},
			want: []float64{0.5 * (1 - 1.0/128), 0.375, 0.25, 0, 0},
		},
		{name: "unusable", eps: []*EndpointBuilder{Ep("a").NoMetrics(), Ep("b").Waiting(-1)}, want: []float64{0, 0}},
	})
	t.Run("custom threshold", func(t *testing.T) {
		got := Score(&scorers.LoadAware{Threshold: 10}, nil, Eps(Ep("a").Waiting(5), Ep("b").Waiting(10))...)
		if want := []float64{0.25, 0}; !slices.Equal(got, want) {
			t.Errorf("scores = %v, want %v", got, want)
		}
	})
	t.Run("zero value uses the default", func(t *testing.T) {
		got := Score(&scorers.LoadAware{}, nil, Eps(Ep("a").Waiting(64))...)
		if want := []float64{0.25}; !slices.Equal(got, want) {
			t.Errorf("scores = %v, want %v", got, want)
		}
	})
}

func TestLoadAwareParameters(t *testing.T) {
	reg := plugins.NewRegistry()
	plugins.Register[*scorers.LoadAware](reg, "load-aware-scorer")
	if s := pluginstest.Build[*scorers.LoadAware](t, reg, "load-aware-scorer", ""); s.Threshold != 128 {
		t.Errorf("default threshold = %d, want 128", s.Threshold)
	}
	if s := pluginstest.Build[*scorers.LoadAware](t, reg, "load-aware-scorer", `{"threshold": 64}`); s.Threshold != 64 {
		t.Errorf("threshold = %d, want 64", s.Threshold)
	}
	for _, bad := range []string{`{"threshold": 0}`, `{"threshold": -5}`, `{"threshold": 1.5}`, `{"threshold": "x"}`} {
		if _, err := reg.Build("load-aware-scorer", "la", []byte(bad)); err == nil {
			t.Errorf("parameters %s: no error", bad)
		}
	}
}

func TestConformance(t *testing.T) {
	for _, s := range stock {
		t.Run(s.typ, func(t *testing.T) { TestScorer(t, s.new) })
	}
}

func TestScoreDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are only meaningful without -race")
	}
	eps := benchEndpoints(64)
	req := Req("base").Target("a1").Build()
	scores := make([]float64, len(eps))
	for _, s := range stock {
		sc := s.new()
		if n := testing.AllocsPerRun(100, func() { sc.Score(context.Background(), req, eps, scores) }); n != 0 {
			t.Errorf("%s: %v allocations per Score, want 0", s.typ, n)
		}
	}
}

// benchEndpoints returns n endpoints with varied metrics and LoRA state.
func benchEndpoints(n int) []*scheduling.Endpoint {
	bs := make([]*EndpointBuilder, n)
	adapters := []string{"a0", "a1", "a2", "a3"}
	for i := range bs {
		bs[i] = Ep(fmt.Sprintf("ep-%d", i)).Waiting(i%17).Running(i%11).KV(float64(i%10)/10).
			LoRA(adapters[:i%3], adapters[3:], 4)
	}
	return Eps(bs...)
}

func BenchmarkScore(b *testing.B) {
	for _, s := range stock[:5] {
		for _, n := range []int{8, 64, 256} {
			b.Run(fmt.Sprintf("%s/N=%d", s.typ, n), func(b *testing.B) {
				eps, sc := benchEndpoints(n), s.new()
				req := Req("base").Target("a1").Build()
				scores := make([]float64, n)
				b.ReportAllocs()
				for b.Loop() {
					clear(scores)
					sc.Score(context.Background(), req, eps, scores)
				}
			})
		}
	}
}
