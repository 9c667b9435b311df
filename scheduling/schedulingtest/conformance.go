package schedulingtest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// Case is one input of a conformance suite: a request, the candidate
// endpoints and, for pickers, their totals (nil: the suite derives some).
// Pass extra cases to exercise what the stock inputs cannot, e.g. requests
// carrying the typed data a scorer consumes.
type Case struct {
	Name      string
	Req       *scheduling.Request
	Endpoints []*scheduling.Endpoint
	Totals    []float64
}

// TestScorer checks that the scorers newScorer returns honour the Scorer
// contract on varied inputs (the stock cases plus extra): every score is in
// [0,1] and not NaN, including for endpoints with missing, NaN, infinite or
// negative metrics; nothing is written past len(endpoints); equal inputs give
// equal scores (across fresh instances and repeated calls); neither the
// endpoints nor the request are modified; empty input does not panic; and one
// instance gives the same scores under concurrent use (run with -race).
//
// newScorer must return a new instance each call. If it implements
// plugins.Initializer the suite calls Init with default Deps (seed 1), and
// closes it at the end.
func TestScorer(t *testing.T, newScorer func() scheduling.Scorer, extra ...Case) {
	t.Helper()
	score := func(t *testing.T, s scheduling.Scorer, c Case) []float64 {
		t.Helper()
		n := len(c.Endpoints)
		buf := make([]float64, n+2)
		buf[n], buf[n+1] = sentinel, sentinel
		s.Score(context.Background(), c.Req, c.Endpoints, buf[:n])
		if buf[n] != sentinel || buf[n+1] != sentinel {
			t.Errorf("case %s: Score wrote past len(endpoints)=%d", c.Name, n)
		}
		return buf[:n]
	}
	t.Run("no mutation", func(t *testing.T) {
		s := initialized(t, newScorer())
		for _, c := range freshCases(extra) {
			snap := snapshot(c)
			score(t, s, c)
			snap.check(t, c)
		}
	})
	t.Run("range", func(t *testing.T) {
		s := initialized(t, newScorer())
		for _, c := range freshCases(extra) {
			for i, v := range score(t, s, c) {
				if !(v >= 0 && v <= 1) {
					t.Errorf("case %s: endpoint %s (%+v): score %v, want a value in [0,1]",
						c.Name, c.Endpoints[i].Name, c.Endpoints[i].Metrics, v)
				}
			}
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		a, b := initialized(t, newScorer()), initialized(t, newScorer())
		for _, c := range freshCases(extra) {
			first := score(t, a, c)
			if again := score(t, a, c); !sameFloats(first, again) {
				t.Errorf("case %s: repeated call gave %v, then %v", c.Name, first, again)
			}
			if fresh := score(t, b, c); !sameFloats(first, fresh) {
				t.Errorf("case %s: two instances gave %v and %v", c.Name, first, fresh)
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		s := initialized(t, newScorer())
		s.Score(context.Background(), Req("m").Build(), nil, nil)
		s.Score(context.Background(), Req("m").Build(), []*scheduling.Endpoint{}, []float64{})
	})
	t.Run("concurrent", func(t *testing.T) {
		s := initialized(t, newScorer())
		cases := freshCases(extra)
		want := make([][]float64, len(cases))
		for i, c := range cases {
			want[i] = slices.Clone(score(t, s, c))
		}
		concurrently(t, cases, func(i int, c Case) error {
			if got := score(t, s, c); !sameFloats(got, want[i]) {
				return fmt.Errorf("case %s: concurrent call gave %v, sequential %v", c.Name, got, want[i])
			}
			return nil
		})
	})
}

// TestFilter checks that the filters newFilter returns honour the Filter
// contract: they keep a subsequence of the input in order, without
// duplicates; return the input slice itself when they keep everything; do not
// modify the input slice, the endpoints or the request; give equal results
// for equal inputs across instances with the same seed; accept empty input;
// and are safe for concurrent use (run with -race).
func TestFilter(t *testing.T, newFilter func() scheduling.Filter, extra ...Case) {
	t.Helper()
	filter := func(f scheduling.Filter, c Case) []*scheduling.Endpoint {
		return f.Filter(context.Background(), c.Req, c.Endpoints)
	}
	t.Run("no mutation", func(t *testing.T) {
		f := initialized(t, newFilter())
		for _, c := range freshCases(extra) {
			snap := snapshot(c)
			filter(f, c)
			snap.check(t, c)
		}
	})
	t.Run("subsequence", func(t *testing.T) {
		f := initialized(t, newFilter())
		for _, c := range freshCases(extra) {
			in := slices.Clone(c.Endpoints)
			kept := filter(f, c)
			if !slices.Equal(in, c.Endpoints) {
				t.Errorf("case %s: Filter modified the input slice", c.Name)
			}
			if err := checkSubsequence(kept, in); err != nil {
				t.Errorf("case %s: %v", c.Name, err)
			}
			if len(kept) == len(in) && len(in) > 0 && &kept[0] != &c.Endpoints[0] {
				t.Errorf("case %s: kept every endpoint but returned a new slice, want the input slice", c.Name)
			}
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		a, b := initialized(t, newFilter()), initialized(t, newFilter())
		for _, c := range freshCases(extra) {
			if x, y := filter(a, c), filter(b, c); !slices.Equal(x, y) {
				t.Errorf("case %s: two instances kept %v and %v", c.Name, Names(x), Names(y))
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		f := initialized(t, newFilter())
		if got := f.Filter(context.Background(), Req("m").Build(), nil); len(got) != 0 {
			t.Errorf("Filter(nil) = %v, want none", Names(got))
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		f := initialized(t, newFilter())
		concurrently(t, freshCases(extra), func(_ int, c Case) error {
			return checkSubsequence(filter(f, c), c.Endpoints)
		})
	})
}

// TestPicker checks that the pickers newPicker returns honour the Picker
// contract: for non-empty input they return at least one endpoint, all taken
// from the input and distinct; they modify neither slice, nor the endpoints
// or the request; instances with the same seed pick alike; empty input does
// not panic; and they are safe for concurrent use (run with -race). Cases
// without Totals get several: varied, all tied, all zero, and with NaN.
func TestPicker(t *testing.T, newPicker func() scheduling.Picker, extra ...Case) {
	t.Helper()
	cases := func() []Case {
		var out []Case
		for _, c := range freshCases(extra) {
			if c.Totals != nil || len(c.Endpoints) == 0 {
				out = append(out, c)
				continue
			}
			for _, tc := range totalsFor(len(c.Endpoints)) {
				d := c
				d.Name, d.Totals, d.Req = c.Name+"/"+tc.name, tc.totals, cloneRequest(c.Req)
				out = append(out, d)
			}
		}
		return out
	}
	pick := func(p scheduling.Picker, c Case) []*scheduling.Endpoint {
		return p.Pick(context.Background(), c.Req, c.Endpoints, c.Totals)
	}
	check := func(c Case, picked []*scheduling.Endpoint) error {
		if len(picked) == 0 && len(c.Endpoints) > 0 {
			return fmt.Errorf("case %s: picked nothing from %d endpoints", c.Name, len(c.Endpoints))
		}
		for i, e := range picked {
			if !slices.Contains(c.Endpoints, e) {
				return fmt.Errorf("case %s: picked[%d] is not a candidate", c.Name, i)
			}
			if slices.Index(picked, e) != i {
				return fmt.Errorf("case %s: %s picked twice", c.Name, e.Name)
			}
		}
		return nil
	}
	t.Run("no mutation", func(t *testing.T) {
		p := initialized(t, newPicker())
		for _, c := range cases() {
			snap := snapshot(c)
			pick(p, c)
			snap.check(t, c)
		}
	})
	t.Run("valid", func(t *testing.T) {
		p := initialized(t, newPicker())
		for _, c := range cases() {
			eps, totals := slices.Clone(c.Endpoints), slices.Clone(c.Totals)
			if err := check(c, pick(p, c)); err != nil {
				t.Error(err)
			}
			if !slices.Equal(eps, c.Endpoints) || !sameFloats(totals, c.Totals) {
				t.Errorf("case %s: Pick modified its input slices", c.Name)
			}
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		a, b := initialized(t, newPicker()), initialized(t, newPicker())
		for _, c := range cases() {
			if x, y := pick(a, c), pick(b, c); !slices.Equal(x, y) {
				t.Errorf("case %s: two instances with the same seed picked %v and %v", c.Name, Names(x), Names(y))
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		p := initialized(t, newPicker())
		p.Pick(context.Background(), Req("m").Build(), nil, nil)
	})
	t.Run("concurrent", func(t *testing.T) {
		p := initialized(t, newPicker())
		concurrently(t, cases(), func(_ int, c Case) error { return check(c, pick(p, c)) })
	})
}

const sentinel = -12345.0

// initialized calls p's Init with default Deps and closes it when t ends.
func initialized[P any](t *testing.T, p P) P {
	t.Helper()
	if err := plugins.Init(context.Background(), p, plugins.Deps{Name: "conformance"}.WithDefaults()); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() {
		if err := plugins.CloseAll([]any{p}); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// concurrently runs fn over every case from several goroutines, each with
// its own copy of the request (requests are never shared at runtime), a
// bounded number of times.
func concurrently(t *testing.T, cases []Case, fn func(i int, c Case) error) {
	t.Helper()
	const goroutines, rounds = 8, 4
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				for i, c := range cases {
					c.Req = cloneRequest(c.Req)
					if err := fn(i, c); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func checkSubsequence(kept, in []*scheduling.Endpoint) error {
	j := 0
	for k, e := range kept {
		for j < len(in) && in[j] != e {
			j++
		}
		if j == len(in) {
			return fmt.Errorf("kept[%d] (%s) is not a candidate, a duplicate, or out of order", k, e.Name)
		}
		j++
	}
	return nil
}

func sameFloats(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool {
		return x == y || (math.IsNaN(x) && math.IsNaN(y))
	})
}

type caseSnapshot struct {
	eps  []*scheduling.Endpoint
	vals []endpointState
	req  scheduling.Request
}

// endpointState is a deep copy of an endpoint comparable with
// reflect.DeepEqual: the KV usage is kept as bits, so NaN equals NaN.
type endpointState struct {
	e      datalayer.Endpoint
	kvBits uint64
}

// snapshot deep-copies what a plugin must not modify.
func snapshot(c Case) caseSnapshot {
	s := caseSnapshot{eps: slices.Clone(c.Endpoints), req: *cloneRequest(c.Req)}
	for _, e := range c.Endpoints {
		s.vals = append(s.vals, cloneEndpoint(e))
	}
	return s
}

func (s caseSnapshot) check(t *testing.T, c Case) {
	t.Helper()
	if !slices.Equal(s.eps, c.Endpoints) {
		t.Errorf("case %s: the endpoint slice was modified", c.Name)
		return
	}
	for i, e := range c.Endpoints {
		if now := cloneEndpoint(e); !reflect.DeepEqual(s.vals[i], now) {
			t.Errorf("case %s: endpoint %s was modified:\nbefore %+v\nafter  %+v", c.Name, e.Name, s.vals[i], now)
		}
	}
	if now := *cloneRequest(c.Req); !reflect.DeepEqual(s.req, now) {
		t.Errorf("case %s: the request was modified:\nbefore %+v\nafter  %+v", c.Name, s.req, now)
	}
}

func cloneEndpoint(e *scheduling.Endpoint) endpointState {
	c := *e
	c.Labels = maps.Clone(e.Labels)
	c.Metrics.LoRA.Active = slices.Clone(e.Metrics.LoRA.Active)
	c.Metrics.LoRA.Waiting = slices.Clone(e.Metrics.LoRA.Waiting)
	c.Attrs = e.Attrs.Clone()
	c.Metrics.KVUsage = 0
	return endpointState{c, math.Float64bits(e.Metrics.KVUsage)}
}

// endpoint returns the copied endpoint.
func (s endpointState) endpoint() datalayer.Endpoint {
	e := s.e
	e.Metrics.KVUsage = math.Float64frombits(s.kvBits)
	return e
}

func cloneRequest(r *scheduling.Request) *scheduling.Request {
	if r == nil {
		return nil
	}
	c := *r
	c.Headers = maps.Clone(r.Headers)
	c.AddedHeaders = maps.Clone(r.AddedHeaders)
	c.Data = r.Data.Clone()
	if r.Body != nil {
		b := *r.Body
		b.Messages = slices.Clone(b.Messages)
		b.Tools = slices.Clone(b.Tools)
		b.TokenIDs = slices.Clone(b.TokenIDs)
		b.Raw = slices.Clone(b.Raw)
		c.Body = &b
	}
	return &c
}

type totalsCase struct {
	name   string
	totals []float64
}

func totalsFor(n int) []totalsCase {
	varied, tied, zero, nan := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		varied[i] = float64((i*7)%5) / 2
		tied[i] = 1.5
		nan[i] = float64(i % 3)
		if i%2 == 0 {
			nan[i] = math.NaN()
		}
	}
	return []totalsCase{{"varied", varied}, {"tied", tied}, {"zero", zero}, {"nan", nan}}
}

// freshCases returns new stock cases followed by deep copies of extra, so a
// plugin that modifies its input in one subtest cannot hide it from the next.
func freshCases(extra []Case) []Case {
	out := stockCases()
	for _, c := range extra {
		c.Req = cloneRequest(c.Req)
		c.Totals = slices.Clone(c.Totals)
		eps := make([]*scheduling.Endpoint, len(c.Endpoints))
		for i, e := range c.Endpoints {
			e := cloneEndpoint(e).endpoint()
			eps[i] = &e
		}
		c.Endpoints = eps
		out = append(out, c)
	}
	return out
}

// stockCases are the shared inputs: ordinary, tied, extreme and broken
// metrics, over several requests.
func stockCases() []Case {
	nan, inf := math.NaN(), math.Inf(1)
	sets := []struct {
		name string
		eps  []*EndpointBuilder
	}{
		{"single", []*EndpointBuilder{Ep("a").Waiting(3).Running(2).KV(0.4)}},
		{"equal", []*EndpointBuilder{Ep("a").Waiting(2), Ep("b").Waiting(2), Ep("c").Waiting(2)}},
		{"varied", []*EndpointBuilder{
			Ep("a").Waiting(0).Running(1).KV(0).LoRA([]string{"sql"}, nil, 2).Label("role", "decode"),
			Ep("b").Waiting(10).Running(5).KV(0.5).LoRA([]string{"chat", "math"}, []string{"sql"}, 2),
			Ep("c").Waiting(200).Running(64).KV(1).LoRA(nil, []string{"sql"}, 4).Label("role", "prefill"),
			Ep("d").Waiting(64).Running(0).KV(0.93).LoRA([]string{"chat"}, []string{"chat"}, 2),
		}},
		{"broken metrics", []*EndpointBuilder{
			Ep("ok").Waiting(4).KV(0.2),
			Ep("never-scraped").NoMetrics(),
			Ep("nan-kv").KV(nan),
			Ep("inf-kv").KV(inf),
			Ep("over-full-kv").KV(1.7),
			Ep("negative-kv").KV(-0.3),
			Ep("negative-waiting").Waiting(-5),
			Ep("negative-running").Running(-1),
			Ep("negative-lora-max").LoRA([]string{"sql"}, nil, -1),
		}},
		{"all unusable", []*EndpointBuilder{Ep("a").NoMetrics(), Ep("b").KV(nan), Ep("c").Waiting(-1)}},
		{"extreme", []*EndpointBuilder{
			Ep("huge").Waiting(math.MaxInt32).Running(math.MaxInt32).KV(1),
			Ep("zero").Waiting(0),
			Ep("big-lora").LoRA(nil, nil, math.MaxInt32),
		}},
		{"many", manyEndpoints(64)},
	}
	reqs := []struct {
		name string
		req  *scheduling.Request
	}{
		{"base", Req("base-model").Build()},
		{"adapter", Req("base-model").Target("sql").Header("x-llm-d-profile", "default").Prompt("hello").Build()},
		{"empty", &scheduling.Request{}},
	}
	var out []Case
	for _, s := range sets {
		for _, r := range reqs {
			out = append(out, Case{Name: s.name + "/" + r.name, Req: cloneRequest(r.req), Endpoints: Eps(s.eps...)})
		}
	}
	return out
}

func manyEndpoints(n int) []*EndpointBuilder {
	out := make([]*EndpointBuilder, n)
	adapters := []string{"sql", "chat", "math"}
	for i := range out {
		out[i] = Ep(fmt.Sprintf("ep-%02d", i)).
			Waiting((i*37)%50).Running((i*11)%20).KV(float64((i*13)%100)/100).
			LoRA(adapters[:i%3], adapters[i%3:i%3+1], 1+i%4)
		if i%9 == 0 {
			out[i].NoMetrics()
		}
	}
	return out
}
