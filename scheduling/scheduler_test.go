package scheduling_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/scheduling"
)

func eps(n int) []*scheduling.Endpoint {
	out := make([]*scheduling.Endpoint, n)
	for i := range out {
		out[i] = datalayer.New(fmt.Sprint("e", i), fmt.Sprintf("10.0.0.%d", i), 8000, nil).
			WithMetrics(datalayer.Metrics{Waiting: i, UpdateTime: time.Unix(1, 0)})
	}
	return out
}

// constScorer returns v[i] for endpoint i (by position).
func constScorer(v ...float64) scheduling.Scorer {
	return scheduling.ScorerFunc(func(_ context.Context, _ *scheduling.Request, e []*scheduling.Endpoint, s []float64) {
		copy(s, v)
	})
}

// argmax picks the first highest total.
var argmax = scheduling.PickerFunc(func(_ context.Context, _ *scheduling.Request, e []*scheduling.Endpoint, t []float64) []*scheduling.Endpoint {
	best := 0
	for i := range t {
		if t[i] > t[best] {
			best = i
		}
	}
	return []*scheduling.Endpoint{e[best]}
})

var single = scheduling.ProfileHandlerFunc(func(ctx context.Context, _ *scheduling.Request, names []string, run scheduling.RunProfileFunc) (string, error) {
	_, err := run(ctx, names[0])
	return names[0], err
})

func newSched(t *testing.T, p *scheduling.Profile) *scheduling.Scheduler {
	t.Helper()
	s, err := scheduling.New(single, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWeightedSumAndClamp(t *testing.T) {
	var seen []float64
	picker := scheduling.PickerFunc(func(ctx context.Context, r *scheduling.Request, e []*scheduling.Endpoint, tot []float64) []*scheduling.Endpoint {
		seen = append([]float64(nil), tot...)
		return argmax(ctx, r, e, tot)
	})
	s := newSched(t, &scheduling.Profile{Name: "p", Picker: picker, PickerName: "argmax", Scorers: []scheduling.WeightedScorer{
		{Name: "a", Weight: 2, Scorer: constScorer(0.5, 1.5, -1)},
		{Name: "b", Weight: 3, Scorer: constScorer(math.NaN(), 0.25, 1)},
	}})
	req := &scheduling.Request{Trace: &scheduling.Trace{}}
	res, err := s.Schedule(context.Background(), req, eps(3))
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 2.75, 3}
	for i := range want {
		if math.Abs(seen[i]-want[i]) > 1e-12 {
			t.Fatalf("totals = %v, want %v", seen, want)
		}
	}
	if got := res.PrimaryResult().Endpoints[0].Name; got != "e2" {
		t.Fatalf("picked %s", got)
	}
	pt := req.Trace.Profiles[0]
	if pt.Scorers[0].Scores[1] != 1 || pt.Scorers[0].Scores[2] != 0 || pt.Scorers[1].Scores[0] != 0 {
		t.Fatalf("trace scores not clamped: %+v", pt.Scorers)
	}
	if req.Trace.Primary != "p" || pt.Picked[0] != "10.0.0.2:8000" || !strings.Contains(pt.Reason, "highest total 3") {
		t.Fatalf("trace = %+v", pt)
	}
	out := req.Trace.String()
	for _, w := range []string{"a×2", "b×3", "picker argmax picked 10.0.0.2:8000", "primary profile: p"} {
		if !strings.Contains(out, w) {
			t.Errorf("trace text lacks %q:\n%s", w, out)
		}
	}
}

func TestFiltersAndErrors(t *testing.T) {
	dropFirst := scheduling.FilterFunc(func(_ context.Context, _ *scheduling.Request, e []*scheduling.Endpoint) []*scheduling.Endpoint {
		return append([]*scheduling.Endpoint(nil), e[1:]...)
	})
	s := newSched(t, &scheduling.Profile{Name: "p", Picker: argmax, PickerName: "argmax",
		Filters: []scheduling.NamedFilter{{Name: "drop-first", Filter: dropFirst}}})
	req := &scheduling.Request{Trace: &scheduling.Trace{}}
	res, err := s.Schedule(context.Background(), req, eps(2))
	if err != nil || res.PrimaryResult().Endpoints[0].Name != "e1" {
		t.Fatalf("res %+v err %v", res, err)
	}
	if f := req.Trace.Profiles[0].Filters[0]; f.Filter != "drop-first" || len(f.Removed) != 1 || f.Removed[0] != "10.0.0.0:8000" {
		t.Fatalf("filter trace %+v", f)
	}
	req = &scheduling.Request{Trace: &scheduling.Trace{}}
	_, err = s.Schedule(context.Background(), req, eps(1))
	if !errors.Is(err, scheduling.ErrAllFiltered) || !strings.Contains(err.Error(), "drop-first") {
		t.Fatalf("err = %v", err)
	}
	if req.Trace.Profiles[0].Error == "" {
		t.Fatal("trace lacks the error")
	}
	if _, err := s.Schedule(context.Background(), &scheduling.Request{}, nil); !errors.Is(err, scheduling.ErrNoCandidates) {
		t.Fatalf("empty candidates err = %v", err)
	}
}

func TestProfileHandlerSequencing(t *testing.T) {
	prefillFirst := scheduling.ProfileHandlerFunc(func(ctx context.Context, r *scheduling.Request, names []string, run scheduling.RunProfileFunc) (string, error) {
		d, err := run(ctx, "decode")
		if err != nil {
			return "", err
		}
		if d.Endpoints[0].Name == "e1" {
			p, err := run(ctx, "prefill")
			if err != nil {
				return "", err
			}
			r.SetHeader("x-prefiller-host-port", p.Endpoints[0].HostPort())
		}
		if _, err := run(ctx, "nope"); !errors.Is(err, scheduling.ErrUnknownProfile) {
			return "", fmt.Errorf("unknown profile err = %v", err)
		}
		return "decode", nil
	})
	s, err := scheduling.New(prefillFirst,
		&scheduling.Profile{Name: "prefill", Picker: argmax, Scorers: []scheduling.WeightedScorer{{Weight: 1, Scorer: constScorer(1, 0)}}},
		&scheduling.Profile{Name: "decode", Picker: argmax, Scorers: []scheduling.WeightedScorer{{Weight: 1, Scorer: constScorer(0, 1)}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	req := &scheduling.Request{}
	res, err := s.Schedule(context.Background(), req, eps(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.Primary != "decode" || len(res.Profiles) != 2 || res.Get("prefill").Endpoints[0].Name != "e0" {
		t.Fatalf("result %+v", res)
	}
	if req.AddedHeaders["x-prefiller-host-port"] != "10.0.0.0:8000" {
		t.Fatalf("headers %v", req.AddedHeaders)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := scheduling.New(single); err == nil {
		t.Error("no profiles accepted")
	}
	if _, err := scheduling.New(nil, &scheduling.Profile{Name: "p", Picker: argmax}); err == nil {
		t.Error("nil handler accepted")
	}
	if _, err := scheduling.New(single, &scheduling.Profile{Name: "p"}); err == nil {
		t.Error("profile without picker accepted")
	}
	if _, err := scheduling.New(single, &scheduling.Profile{Name: "p", Picker: argmax}, &scheduling.Profile{Name: "p", Picker: argmax}); err == nil {
		t.Error("duplicate profile accepted")
	}
	bad := scheduling.ProfileHandlerFunc(func(context.Context, *scheduling.Request, []string, scheduling.RunProfileFunc) (string, error) {
		return "ghost", nil
	})
	s, _ := scheduling.New(bad, &scheduling.Profile{Name: "p", Picker: argmax})
	if _, err := s.Schedule(context.Background(), &scheduling.Request{}, eps(1)); err == nil {
		t.Error("primary that never ran accepted")
	}
}

func TestNoTraceNoAllocsInScoring(t *testing.T) {
	s := newSched(t, &scheduling.Profile{Name: "p", Picker: argmax, Scorers: []scheduling.WeightedScorer{
		{Weight: 1, Scorer: constScorer(0.1, 0.2, 0.3)}, {Weight: 2, Scorer: constScorer(0.3, 0.2, 0.1)},
	}})
	e := eps(64)
	req := &scheduling.Request{}
	n := testing.AllocsPerRun(200, func() {
		if _, err := s.Schedule(context.Background(), req, e); err != nil {
			t.Fatal(err)
		}
	})
	// Result, its profile slice, the run closure and the picked slice.
	if n > 4 {
		t.Fatalf("allocs per cycle = %v, want ≤ 4", n)
	}
}
