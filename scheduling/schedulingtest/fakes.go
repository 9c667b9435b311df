package schedulingtest

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/eppkit/eppkit/scheduling"
)

// ConstScorer gives every endpoint the same score.
type ConstScorer float64

// Score implements scheduling.Scorer.
func (c ConstScorer) Score(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i := range eps {
		scores[i] = float64(c)
	}
}

// ScoreByName scores endpoints by name; endpoints not listed score 0.
type ScoreByName map[string]float64

// Score implements scheduling.Scorer.
func (m ScoreByName) Score(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i, e := range eps {
		scores[i] = m[e.Name]
	}
}

// FuncScorer scores each endpoint with fn.
type FuncScorer func(req *scheduling.Request, e *scheduling.Endpoint) float64

// Score implements scheduling.Scorer.
func (fn FuncScorer) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i, e := range eps {
		scores[i] = fn(req, e)
	}
}

// DropFilter removes the endpoints with the given names.
type DropFilter []string

// Filter implements scheduling.Filter.
func (d DropFilter) Filter(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
	kept := 0
	for _, e := range eps {
		if !slices.Contains(d, e.Name) {
			kept++
		}
	}
	if kept == len(eps) {
		return eps
	}
	out := make([]*scheduling.Endpoint, 0, kept)
	for _, e := range eps {
		if !slices.Contains(d, e.Name) {
			out = append(out, e)
		}
	}
	return out
}

// TopPicker is a deterministic picker: the N highest totals in descending
// order, ties in input order (N ≤ 0 means 1). Use it where a test must not
// depend on random tie-breaking.
type TopPicker struct{ N int }

// Pick implements scheduling.Picker.
func (p *TopPicker) Pick(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint, totals []float64) []*scheduling.Endpoint {
	if len(eps) == 0 {
		return nil
	}
	idx := make([]int, len(eps))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Compare(totals[b], totals[a]) // descending; NaN last
	})
	out := make([]*scheduling.Endpoint, min(max(p.N, 1), len(eps)))
	for i := range out {
		out[i] = eps[idx[i]]
	}
	return out
}

// PickCall is one call a RecordingPicker saw.
type PickCall struct {
	Endpoints []*scheduling.Endpoint
	Totals    []float64
	Picked    []*scheduling.Endpoint
}

// RecordingPicker records every call (copies of the endpoints and totals it
// was given, and what it returned) and delegates to Next, or to TopPicker
// when Next is nil. It is safe for concurrent use.
type RecordingPicker struct {
	Next scheduling.Picker

	mu    sync.Mutex
	calls []PickCall
}

// Pick implements scheduling.Picker.
func (r *RecordingPicker) Pick(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, totals []float64) []*scheduling.Endpoint {
	next := r.Next
	if next == nil {
		next = &TopPicker{}
	}
	picked := next.Pick(ctx, req, eps, totals)
	r.mu.Lock()
	r.calls = append(r.calls, PickCall{slices.Clone(eps), slices.Clone(totals), slices.Clone(picked)})
	r.mu.Unlock()
	return picked
}

// Calls returns the calls recorded so far, oldest first.
func (r *RecordingPicker) Calls() []PickCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Last returns the most recent call; ok is false when there was none.
func (r *RecordingPicker) Last() (call PickCall, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return PickCall{}, false
	}
	return r.calls[len(r.calls)-1], true
}
