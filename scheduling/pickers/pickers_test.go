package pickers_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/pickers"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func four() []*scheduling.Endpoint { return Eps(Ep("a"), Ep("b"), Ep("c"), Ep("d")) }

// seeded returns p after Init with a source seeded with seed.
func seeded[P plugins.Initializer](t testing.TB, p P, seed uint64) P {
	t.Helper()
	if err := p.Init(context.Background(), plugins.Deps{Rand: plugins.NewRand(seed)}); err != nil {
		t.Fatal(err)
	}
	return p
}

// counts tallies the names picked first over n picks.
func counts(p scheduling.Picker, eps []*scheduling.Endpoint, totals []float64, n int) map[string]int {
	c := map[string]int{}
	for range n {
		c[Pick(p, nil, eps, totals...)[0].Name]++
	}
	return c
}

func near(got, n int, want, tol float64) bool { return math.Abs(float64(got)/float64(n)-want) <= tol }

func TestMaxScore(t *testing.T) {
	eps := four()
	cases := []struct {
		name   string
		maxNum int
		totals []float64
		want   []string
	}{
		{"highest", 1, []float64{0.2, 1.7, 0.9, 1.1}, []string{"b"}},
		{"fallbacks by total", 3, []float64{0.2, 1.7, 0.9, 1.1}, []string{"b", "d", "c"}},
		{"more than candidates", 10, []float64{0.2, 1.7, 0.9, 1.1}, []string{"b", "d", "c", "a"}},
		{"NaN never beats a number", 1, []float64{math.NaN(), 0, math.NaN(), math.NaN()}, []string{"b"}},
		{"NaN last", 4, []float64{math.NaN(), 0.5, 1, 0}, []string{"c", "b", "d", "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &pickers.MaxScore{MaxNumOfEndpoints: tc.maxNum}
			if got := Names(Pick(p, nil, eps, tc.totals...)); !slices.Equal(got, tc.want) {
				t.Errorf("picked %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		if got := Pick(&pickers.MaxScore{}, nil, nil); got != nil {
			t.Errorf("picked %v from nothing", Names(got))
		}
	})
}

func TestMaxScoreTies(t *testing.T) {
	eps := four()
	totals := []float64{2, 1, 2, 2}
	const n = 6000
	c := counts(seeded(t, &pickers.MaxScore{MaxNumOfEndpoints: 1}, 3), eps, totals, n)
	if c["b"] != 0 {
		t.Errorf("b (lower total) picked %d times", c["b"])
	}
	for _, name := range []string{"a", "c", "d"} {
		if !near(c[name], n, 1.0/3, 0.03) {
			t.Errorf("tie-break not uniform: %v", c)
		}
	}
	// With fallbacks, ties come in random order but always before lower totals.
	p := seeded(t, &pickers.MaxScore{MaxNumOfEndpoints: 4}, 3)
	firsts := map[string]int{}
	for range 3000 {
		got := Names(Pick(p, nil, eps, totals...))
		if got[3] != "b" {
			t.Fatalf("picked %v, want b last", got)
		}
		firsts[got[0]]++
	}
	for _, name := range []string{"a", "c", "d"} {
		if !near(firsts[name], 3000, 1.0/3, 0.04) {
			t.Errorf("primary among ties not uniform with fallbacks: %v", firsts)
		}
	}
}

// TestMaxScoreOrder checks, on random totals with many ties, that every k
// (both the level-by-level and the sorting strategy) returns the k best
// totals in descending order.
func TestMaxScoreOrder(t *testing.T) {
	r := plugins.NewRand(99)
	for trial := range 200 {
		n := 1 + r.IntN(40)
		eps := make([]*EndpointBuilder, n)
		totals := make([]float64, n)
		for i := range n {
			eps[i] = Ep(fmt.Sprint(i))
			totals[i] = float64(r.IntN(5)) / 4
			if r.IntN(10) == 0 {
				totals[i] = math.NaN()
			}
		}
		want := slices.Clone(totals)
		slices.SortFunc(want, func(a, b float64) int { return cmp.Compare(b, a) })
		for _, k := range []int{1, 2, 5, 8, 9, 20, 64} {
			p := seeded(t, &pickers.MaxScore{MaxNumOfEndpoints: k}, uint64(trial))
			all := Eps(eps...)
			got := Pick(p, nil, all, totals...)
			if len(got) != min(k, n) || distinct(got) != len(got) {
				t.Fatalf("n=%d k=%d: picked %v", n, k, Names(got))
			}
			for i, e := range got {
				if gt := totals[slices.Index(all, e)]; cmp.Compare(gt, want[i]) != 0 {
					t.Fatalf("n=%d k=%d: picked[%d] has total %v, want %v (totals %v)", n, k, i, gt, want[i], totals)
				}
			}
		}
	}
}

// TestMaxScoreTiesSorted checks tie-breaking on the sorting path (k > 8).
func TestMaxScoreTiesSorted(t *testing.T) {
	bs := []*EndpointBuilder{Ep("best")}
	totals := []float64{2}
	for i := range 11 {
		bs = append(bs, Ep(fmt.Sprint("tie-", i)))
		totals = append(totals, 1)
	}
	eps := Eps(bs...)
	p := seeded(t, &pickers.MaxScore{MaxNumOfEndpoints: 10}, 5)
	second := map[string]int{}
	const n = 5500
	for range n {
		got := Pick(p, nil, eps, totals...)
		if got[0].Name != "best" {
			t.Fatalf("picked %v, want best first", Names(got))
		}
		second[got[1].Name]++
	}
	for name, c := range second {
		if !near(c, n, 1.0/11, 0.025) {
			t.Errorf("second place not uniform among ties: %s %d/%d", name, c, n)
		}
	}
}

func TestRandom(t *testing.T) {
	eps := four()
	const n = 8000
	c := counts(seeded(t, &pickers.Random{MaxNumOfEndpoints: 1}, 5), eps, []float64{9, 0, 0, 0}, n)
	for _, name := range []string{"a", "b", "c", "d"} {
		if !near(c[name], n, 0.25, 0.03) {
			t.Errorf("not uniform, ignoring totals: %v", c)
		}
	}
	p := seeded(t, &pickers.Random{MaxNumOfEndpoints: 3}, 5)
	for range 100 {
		if got := Pick(p, nil, eps, 0, 0, 0, 0); len(got) != 3 || distinct(got) != 3 {
			t.Fatalf("picked %v, want 3 distinct", Names(got))
		}
	}
	if got := Pick(&pickers.Random{MaxNumOfEndpoints: 9}, nil, eps, 0, 0, 0, 0); distinct(got) != 4 {
		t.Errorf("picked %v, want all 4", Names(got))
	}
}

func TestWeightedRandom(t *testing.T) {
	eps := four()
	const n = 10000
	t.Run("proportional", func(t *testing.T) {
		c := counts(seeded(t, &pickers.WeightedRandom{MaxNumOfEndpoints: 1}, 11), eps, []float64{1, 3, 0, 4}, n)
		for name, want := range map[string]float64{"a": 0.125, "b": 0.375, "c": 0, "d": 0.5} {
			if !near(c[name], n, want, 0.02) {
				t.Errorf("%s picked %d/%d, want share %v", name, c[name], n, want)
			}
		}
	})
	t.Run("all zero is uniform", func(t *testing.T) {
		c := counts(seeded(t, &pickers.WeightedRandom{MaxNumOfEndpoints: 1}, 11), eps, []float64{0, 0, 0, 0}, n)
		for _, name := range []string{"a", "b", "c", "d"} {
			if !near(c[name], n, 0.25, 0.02) {
				t.Errorf("not uniform: %v", c)
			}
		}
	})
	t.Run("negative and NaN weigh 0", func(t *testing.T) {
		c := counts(seeded(t, &pickers.WeightedRandom{MaxNumOfEndpoints: 1}, 11), eps, []float64{-5, math.NaN(), 1, math.Inf(1)}, 500)
		if c["c"] != 500 {
			t.Errorf("picked %v, want only c", c)
		}
	})
	t.Run("without replacement", func(t *testing.T) {
		p := seeded(t, &pickers.WeightedRandom{MaxNumOfEndpoints: 3}, 11)
		seconds := map[string]int{}
		for range n {
			got := Pick(p, nil, eps, 1, 3, 0, 4)
			if len(got) != 3 || distinct(got) != 3 {
				t.Fatalf("picked %v, want 3 distinct", Names(got))
			}
			if got[0].Name == "d" {
				seconds[got[1].Name]++
			}
		}
		// Given d first, a (1) and b (3) remain with weight, so b comes second
		// with probability 3/4 and c (weight 0) never does.
		total := seconds["a"] + seconds["b"] + seconds["c"]
		if seconds["c"] != 0 || !near(seconds["b"], total, 0.75, 0.03) {
			t.Errorf("second picks after d: %v", seconds)
		}
	})
	t.Run("zero weights fill remaining slots", func(t *testing.T) {
		got := Pick(&pickers.WeightedRandom{MaxNumOfEndpoints: 4}, nil, eps, 0, 1, 0, 0)
		if len(got) != 4 || distinct(got) != 4 || got[0].Name != "b" {
			t.Errorf("picked %v, want b then the other three", Names(got))
		}
	})
}

func distinct(eps []*scheduling.Endpoint) int {
	seen := map[*scheduling.Endpoint]bool{}
	for _, e := range eps {
		seen[e] = true
	}
	return len(seen)
}

func TestDeterministicForSeed(t *testing.T) {
	eps := Eps(Ep("a"), Ep("b"), Ep("c"), Ep("d"), Ep("e"))
	totals := []float64{1, 1, 0.5, 1, 0.25}
	for _, newP := range []func() scheduling.Picker{
		func() scheduling.Picker { return &pickers.MaxScore{MaxNumOfEndpoints: 1} },
		func() scheduling.Picker { return &pickers.MaxScore{MaxNumOfEndpoints: 3} },
		func() scheduling.Picker { return &pickers.Random{MaxNumOfEndpoints: 2} },
		func() scheduling.Picker { return &pickers.WeightedRandom{MaxNumOfEndpoints: 2} },
	} {
		seq := func(seed uint64) (out []string) {
			p := newP()
			if seed != 0 {
				seeded(t, p.(plugins.Initializer), seed)
			}
			for range 50 {
				out = append(out, Names(Pick(p, nil, eps, totals...))...)
			}
			return out
		}
		if a, b := seq(42), seq(42); !slices.Equal(a, b) {
			t.Errorf("%T: same seed, different picks", newP())
		}
		if a, b := seq(0), seq(1); !slices.Equal(a, b) {
			t.Errorf("%T: without Init, want the seed-1 sequence", newP())
		}
		if a, b := seq(1), seq(2); slices.Equal(a, b) {
			t.Errorf("%T: seeds 1 and 2 gave the same 50 picks", newP())
		}
	}
}

func TestParameters(t *testing.T) {
	reg := plugins.NewRegistry()
	plugins.Register[*pickers.MaxScore](reg, "max-score-picker")
	plugins.Register[*pickers.Random](reg, "random-picker")
	plugins.Register[*pickers.WeightedRandom](reg, "weighted-random-picker")
	for _, typ := range []string{"max-score-picker", "random-picker", "weighted-random-picker"} {
		p := pluginstest.Build[scheduling.Picker](t, reg, typ, `{"maxNumOfEndpoints": 2}`)
		if got := Pick(p, nil, four(), 1, 2, 3, 4); len(got) != 2 {
			t.Errorf("%s: picked %d, want 2", typ, len(got))
		}
		def := pluginstest.Build[scheduling.Picker](t, reg, typ, "")
		if got := Pick(def, nil, four(), 1, 2, 3, 4); len(got) != 1 {
			t.Errorf("%s: default picked %d, want 1", typ, len(got))
		}
		for _, bad := range []string{`{"maxNumOfEndpoints": 0}`, `{"maxNumOfEndpoints": -1}`} {
			if _, err := reg.Build(typ, "p", []byte(bad)); err == nil {
				t.Errorf("%s %s: no error", typ, bad)
			}
		}
	}
}

var stock = []struct {
	name string
	new  func() scheduling.Picker
}{
	{"max-score-picker", func() scheduling.Picker { return &pickers.MaxScore{MaxNumOfEndpoints: 1} }},
	{"max-score-picker/3", func() scheduling.Picker { return &pickers.MaxScore{MaxNumOfEndpoints: 3} }},
	{"max-score-picker/zero-value", func() scheduling.Picker { return &pickers.MaxScore{} }},
	{"random-picker", func() scheduling.Picker { return &pickers.Random{MaxNumOfEndpoints: 1} }},
	{"random-picker/3", func() scheduling.Picker { return &pickers.Random{MaxNumOfEndpoints: 3} }},
	{"weighted-random-picker", func() scheduling.Picker { return &pickers.WeightedRandom{MaxNumOfEndpoints: 1} }},
	{"weighted-random-picker/3", func() scheduling.Picker { return &pickers.WeightedRandom{MaxNumOfEndpoints: 3} }},
}

func TestConformance(t *testing.T) {
	for _, s := range stock {
		t.Run(s.name, func(t *testing.T) { TestPicker(t, s.new) })
	}
}

// TestPickAllocations: with one endpoint to return, a pick allocates only
// its one-element result.
func TestPickAllocations(t *testing.T) {
	eps := benchEndpoints(64)
	totals := benchTotals(64)
	for _, s := range stock {
		if strings.HasSuffix(s.name, "/3") {
			continue
		}
		p := s.new()
		if n := testing.AllocsPerRun(100, func() { p.Pick(context.Background(), nil, eps, totals) }); n != 1 {
			t.Errorf("%s: %v allocations per Pick, want 1 (the result)", s.name, n)
		}
	}
}

func benchEndpoints(n int) []*scheduling.Endpoint {
	bs := make([]*EndpointBuilder, n)
	for i := range bs {
		bs[i] = Ep(fmt.Sprintf("ep-%d", i))
	}
	return Eps(bs...)
}

// benchTotals has a four-way tie for the best total.
func benchTotals(n int) []float64 {
	t := make([]float64, n)
	for i := range t {
		t[i] = float64(i%8) / 2
	}
	return t
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			benchPick(b, &pickers.MaxScore{MaxNumOfEndpoints: 1}, n)
		})
	}
}

func BenchmarkPickers(b *testing.B) {
	for _, s := range stock {
		if s.name == "max-score-picker/zero-value" {
			continue
		}
		for _, n := range []int{8, 64, 256} {
			b.Run(fmt.Sprintf("%s/N=%d", s.name, n), func(b *testing.B) { benchPick(b, s.new(), n) })
		}
	}
}

func benchPick(b *testing.B, p scheduling.Picker, n int) {
	eps, totals := benchEndpoints(n), benchTotals(n)
	req := Req("m").Build()
	b.ReportAllocs()
	for b.Loop() {
		p.Pick(context.Background(), req, eps, totals)
	}
}
