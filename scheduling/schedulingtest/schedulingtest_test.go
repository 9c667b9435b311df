package schedulingtest_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppkit/eppkit/scheduling"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func TestEndpointBuilder(t *testing.T) {
	e := Ep("a").Waiting(3).Running(1).KV(0.5).LoRA([]string{"x"}, []string{"y"}, 4).Label("k", "v").Rank(2).Blocks(16, 1000).Build()
	m := e.Metrics
	if e.Name != "a" || m.Waiting != 3 || m.Running != 1 || m.KVUsage != 0.5 || e.Rank != 2 || e.Labels["k"] != "v" ||
		!slices.Equal(m.LoRA.Active, []string{"x"}) || !slices.Equal(m.LoRA.Waiting, []string{"y"}) || m.LoRA.Max != 4 ||
		m.BlockSize != 16 || m.GPUBlocks != 1000 {
		t.Errorf("built %+v", e)
	}
	if !m.Usable() || !m.UpdateTime.Equal(ScrapeTime) {
		t.Errorf("metrics not usable by default: %+v", m)
	}
	if e.Port != DefaultPort || !strings.HasPrefix(e.Address, "10.") || e.HostPort() != e.Address+":8000" {
		t.Errorf("default address %q port %d", e.Address, e.Port)
	}
	if got := Ep("a").Build().Address; got != e.Address {
		t.Errorf("default address not derived from the name: %s vs %s", got, e.Address)
	}
	if e := Ep("a").NoMetrics().Waiting(1).Build(); e.Metrics.Usable() {
		t.Error("NoMetrics endpoint is usable")
	}
	at := ScrapeTime.Add(-time.Minute)
	if e := Ep("a").UpdatedAt(at).Build(); !e.Metrics.UpdateTime.Equal(at) {
		t.Error("UpdatedAt ignored")
	}
	if e := Ep("v6").Addr("fd00::1", 9000).Build(); e.HostPort() != "[fd00::1]:9000" {
		t.Errorf("HostPort = %s", e.HostPort())
	}
	if e := Ep("a").With(func(e *scheduling.Endpoint) { e.Name = "renamed" }).Build(); e.Name != "renamed" {
		t.Error("With not applied")
	}
}

func TestBuildIsIndependent(t *testing.T) {
	b := Ep("a").Label("k", "v").LoRA([]string{"x"}, nil, 2)
	e1, e2 := b.Build(), b.Build()
	e1.Labels["k"] = "changed"
	e1.Metrics.LoRA.Active[0] = "changed"
	if e1 == e2 || e2.Labels["k"] != "v" || e2.Metrics.LoRA.Active[0] != "x" {
		t.Error("built endpoints share state")
	}
}

func TestEpsAddressesAreDistinct(t *testing.T) {
	bs := make([]*EndpointBuilder, 2000)
	for i := range bs {
		bs[i] = Ep(fmt.Sprint("ep-", i))
	}
	bs = append(bs, Ep("dup"), Ep("dup"), Ep("explicit").Addr(Ep("taken").Build().Address, DefaultPort), Ep("taken"))
	seen := map[string]string{}
	for _, e := range Eps(bs...) {
		if prev, dup := seen[e.HostPort()]; dup {
			t.Fatalf("%s and %s share %s", prev, e.Name, e.HostPort())
		}
		seen[e.HostPort()] = e.Name
	}
	if a, b := Eps(Ep("x"), Ep("y")), Eps(Ep("x"), Ep("y")); a[0].HostPort() != b[0].HostPort() || a[1].HostPort() != b[1].HostPort() {
		t.Error("addresses are not deterministic")
	}
}

func TestRequestBuilder(t *testing.T) {
	b := Req("llama").Target("sql").Header("X-Foo", "bar").Priority(-1).Prompt("hi").ID("r1").Trace()
	r1, r2 := b.Build(), b.Build()
	if r1.IncomingModel != "llama" || r1.TargetModel != "sql" || r1.Headers["x-foo"] != "bar" || r1.Priority != -1 ||
		r1.Body.Prompt != "hi" || r1.Body.Model != "llama" || r1.ID != "r1" || r1.Trace == nil {
		t.Errorf("built %+v", r1)
	}
	r1.Headers["x-foo"] = "changed"
	r1.Body.Prompt = "changed"
	if r2.Headers["x-foo"] != "bar" || r2.Body.Prompt != "hi" || r1.Trace == r2.Trace {
		t.Error("built requests share state")
	}
	if r := Req("m").Build(); r.TargetModel != "m" || r.Body != nil || r.Headers != nil {
		t.Errorf("plain request %+v", r)
	}
}

func TestScoreClampsLikeTheRuntime(t *testing.T) {
	raw := FuncScorer(func(_ *scheduling.Request, e *scheduling.Endpoint) float64 {
		return map[string]float64{"hi": 2, "neg": -1, "nan": math.NaN(), "ok": 0.25}[e.Name]
	})
	got := Score(raw, nil, Eps(Ep("hi"), Ep("neg"), Ep("nan"), Ep("ok"))...)
	if want := []float64{1, 0, 0, 0.25}; !slices.Equal(got, want) {
		t.Errorf("Score = %v, want %v", got, want)
	}
	if got := Score(ConstScorer(0.5), nil); len(got) != 0 {
		t.Errorf("Score over nothing = %v", got)
	}
}

func TestPickLengthMismatchPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "2 totals for 1 endpoints") {
			t.Errorf("recovered %v", r)
		}
	}()
	Pick(&TopPicker{}, nil, Eps(Ep("a")), 1, 2)
}

func TestSchedule(t *testing.T) {
	eps := Eps(Ep("a").Waiting(1), Ep("b").Waiting(5), Ep("c"))
	rec := &RecordingPicker{}
	p := Profile("p").
		Filter(DropFilter{"c"}).
		Scorer(ScoreByName{"a": 0.5, "b": 1}, 2).
		Scorer(FuncScorer(func(_ *scheduling.Request, e *scheduling.Endpoint) float64 { return 7 }), 0.5). // clamped to 1
		Picker(rec).
		Build()
	req := Req("m").Trace().Build()
	got, err := Schedule(p, req, eps...)
	if err != nil || !slices.Equal(Names(got), []string{"b"}) {
		t.Fatalf("Schedule = %v, %v", Names(got), err)
	}
	call, ok := rec.Last()
	if !ok || !slices.Equal(Names(call.Endpoints), []string{"a", "b"}) || !slices.Equal(call.Totals, []float64{1.5, 2.5}) {
		t.Errorf("picker saw %v %v", Names(call.Endpoints), call.Totals)
	}
	if len(rec.Calls()) != 1 || len(req.Trace.Profiles) != 1 || req.Trace.Profiles[0].Filters[0].Filter != "schedulingtest.DropFilter" {
		t.Errorf("trace %+v", req.Trace)
	}

	if _, err := Schedule(Profile("p").Filter(DropFilter{"a", "b", "c"}).Build(), nil, eps...); !errors.Is(err, scheduling.ErrAllFiltered) {
		t.Errorf("all filtered: %v", err)
	}
	if _, err := Schedule(Profile("p").Build(), nil); !errors.Is(err, scheduling.ErrNoCandidates) {
		t.Errorf("no candidates: %v", err)
	}
}

func TestFakes(t *testing.T) {
	eps := Eps(Ep("a"), Ep("b"), Ep("c"))
	if got := Filter(DropFilter{"x"}, nil, eps...); &got[0] != &eps[0] {
		t.Error("DropFilter removing nothing did not return its input")
	}
	if got := Names(Filter(DropFilter{"b"}, nil, eps...)); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("DropFilter kept %v", got)
	}
	if got := Names(Pick(&TopPicker{N: 3}, nil, eps, 1, math.NaN(), 1)); !slices.Equal(got, []string{"a", "c", "b"}) {
		t.Errorf("TopPicker picked %v", got)
	}
	if got := Pick(&TopPicker{}, nil, nil); got != nil {
		t.Errorf("TopPicker picked %v from nothing", got)
	}
	if got := Score(ConstScorer(0.3), nil, eps...); !slices.Equal(got, []float64{0.3, 0.3, 0.3}) {
		t.Errorf("ConstScorer = %v", got)
	}
	if _, ok := (&RecordingPicker{}).Last(); ok {
		t.Error("empty recorder has a last call")
	}
}

func TestConformanceOnFakes(t *testing.T) {
	TestScorer(t, func() scheduling.Scorer { return ConstScorer(0.5) })
	TestScorer(t, func() scheduling.Scorer { return ScoreByName{"a": 1, "b": 0.2} })
	TestFilter(t, func() scheduling.Filter { return DropFilter{"a", "ok"} })
	TestPicker(t, func() scheduling.Picker { return &TopPicker{N: 2} })
	TestPicker(t, func() scheduling.Picker { return &RecordingPicker{} })
	extra := Case{Name: "extra", Req: Req("m").Build(), Endpoints: Eps(Ep("x"), Ep("y")), Totals: []float64{0, 1}}
	TestPicker(t, func() scheduling.Picker { return &TopPicker{} }, extra)
}

// broken plugins, each violating one part of a contract; run by
// TestBrokenPluginHelper in a subprocess.
var broken = map[string]struct {
	run  func(t *testing.T)
	want string
}{
	"scorer-out-of-range": {func(t *testing.T) { TestScorer(t, func() scheduling.Scorer { return ConstScorer(1.5) }) }, "want a value in [0,1]"},
	"scorer-nan":          {func(t *testing.T) { TestScorer(t, func() scheduling.Scorer { return ConstScorer(math.NaN()) }) }, "score NaN"},
	"scorer-unusable": {func(t *testing.T) {
		TestScorer(t, func() scheduling.Scorer {
			return FuncScorer(func(_ *scheduling.Request, e *scheduling.Endpoint) float64 { return 1 - e.Metrics.KVUsage })
		})
	}, "endpoint nan-kv"},
	"scorer-writes-past-end": {func(t *testing.T) {
		TestScorer(t, func() scheduling.Scorer {
			return scheduling.ScorerFunc(func(_ context.Context, _ *scheduling.Request, _ []*scheduling.Endpoint, s []float64) {
				s = append(s, 1)
				_ = s
			})
		})
	}, "wrote past len"},
	"scorer-nondeterministic": {func(t *testing.T) {
		var n atomic.Int64
		TestScorer(t, func() scheduling.Scorer {
			return FuncScorer(func(*scheduling.Request, *scheduling.Endpoint) float64 { return float64(n.Add(1)%2) / 2 })
		})
	}, "repeated call gave"},
	"scorer-mutates-endpoint": {func(t *testing.T) {
		TestScorer(t, func() scheduling.Scorer {
			return FuncScorer(func(_ *scheduling.Request, e *scheduling.Endpoint) float64 { e.Metrics.Running++; return 0 })
		})
	}, "was modified"},
	"scorer-mutates-request": {func(t *testing.T) {
		TestScorer(t, func() scheduling.Scorer {
			return FuncScorer(func(r *scheduling.Request, _ *scheduling.Endpoint) float64 { r.Priority = 7; return 0 })
		})
	}, "the request was modified"},
	"filter-copies": {func(t *testing.T) {
		TestFilter(t, func() scheduling.Filter {
			return scheduling.FilterFunc(func(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
				return slices.Clone(eps)
			})
		})
	}, "returned a new slice"},
	"filter-reorders": {func(t *testing.T) {
		TestFilter(t, func() scheduling.Filter {
			return scheduling.FilterFunc(func(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
				out := slices.Clone(eps)
				slices.Reverse(out)
				return out[:len(out)/2]
			})
		})
	}, "out of order"},
	"filter-modifies-input": {func(t *testing.T) {
		TestFilter(t, func() scheduling.Filter {
			return scheduling.FilterFunc(func(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
				if len(eps) > 1 {
					return append(eps[:0], eps[1:]...)
				}
				return eps
			})
		})
	}, "modified the input slice"},
	"picker-none": {func(t *testing.T) {
		TestPicker(t, func() scheduling.Picker {
			return scheduling.PickerFunc(func(context.Context, *scheduling.Request, []*scheduling.Endpoint, []float64) []*scheduling.Endpoint {
				return nil
			})
		})
	}, "picked nothing"},
	"picker-duplicates": {func(t *testing.T) {
		TestPicker(t, func() scheduling.Picker {
			return scheduling.PickerFunc(func(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, _ []float64) []*scheduling.Endpoint {
				if len(eps) == 0 {
					return nil
				}
				return []*scheduling.Endpoint{eps[0], eps[0]}
			})
		})
	}, "picked twice"},
	"picker-foreign": {func(t *testing.T) {
		TestPicker(t, func() scheduling.Picker {
			return scheduling.PickerFunc(func(context.Context, *scheduling.Request, []*scheduling.Endpoint, []float64) []*scheduling.Endpoint {
				return []*scheduling.Endpoint{Ep("stranger").Build()}
			})
		})
	}, "is not a candidate"},
}

const brokenEnv = "SCHEDULINGTEST_BROKEN_PLUGIN"

// TestBrokenPluginHelper runs one conformance suite over a broken plugin when
// started by TestConformanceCatchesBrokenPlugins; it must fail.
func TestBrokenPluginHelper(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("run by TestConformanceCatchesBrokenPlugins")
	}
	broken[name].run(t)
}

func TestConformanceCatchesBrokenPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a test process per broken plugin")
	}
	for name, b := range broken {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenPluginHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a broken plugin:\n%s", out)
			}
			if !strings.Contains(string(out), b.want) {
				t.Errorf("the failure does not say %q:\n%.3000s", b.want, out)
			}
		})
	}
}
