package schedulingtest

import (
	"context"
	"fmt"
	"strings"

	"github.com/eppkit/eppkit/scheduling"
)

// Score runs s over eps as a profile does: with a zeroed buffer of
// len(eps) scores, then clamping each score to [0,1] (NaN becomes 0). A nil
// req means an empty request.
func Score(s scheduling.Scorer, req *scheduling.Request, eps ...*scheduling.Endpoint) []float64 {
	scores := make([]float64, len(eps))
	s.Score(context.Background(), orEmpty(req), eps, scores)
	for i, v := range scores {
		scores[i] = scheduling.Clamp01(v)
	}
	return scores
}

// Filter runs f over eps and returns the endpoints it keeps. A nil req means
// an empty request.
func Filter(f scheduling.Filter, req *scheduling.Request, eps ...*scheduling.Endpoint) []*scheduling.Endpoint {
	return f.Filter(context.Background(), orEmpty(req), eps)
}

// Pick runs p over eps with the given totals (totals[i] for eps[i]) and
// returns its pick, primary first. It panics when the lengths differ: that is
// a mistake in the test. A nil req means an empty request.
func Pick(p scheduling.Picker, req *scheduling.Request, eps []*scheduling.Endpoint, totals ...float64) []*scheduling.Endpoint {
	if len(totals) != len(eps) {
		panic(fmt.Sprintf("schedulingtest.Pick: %d totals for %d endpoints", len(totals), len(eps)))
	}
	return p.Pick(context.Background(), orEmpty(req), eps, totals)
}

// Schedule runs profile over eps through a scheduling.Scheduler, exactly as
// the runtime does (filters, clamped and weighted scores, picker), and returns
// the picked endpoints, primary first. A nil req means an empty request; set
// req.Trace (RequestBuilder.Trace) to see why.
func Schedule(profile *scheduling.Profile, req *scheduling.Request, eps ...*scheduling.Endpoint) ([]*scheduling.Endpoint, error) {
	s, err := scheduling.New(runOnly, profile)
	if err != nil {
		return nil, err
	}
	res, err := s.Schedule(context.Background(), orEmpty(req), eps)
	if err != nil {
		return nil, err
	}
	return res.PrimaryResult().Endpoints, nil
}

var runOnly = scheduling.ProfileHandlerFunc(func(ctx context.Context, _ *scheduling.Request, profiles []string, run scheduling.RunProfileFunc) (string, error) {
	_, err := run(ctx, profiles[0])
	return profiles[0], err
})

// ProfileBuilder assembles a *scheduling.Profile. Start with Profile.
type ProfileBuilder struct{ p scheduling.Profile }

// Profile starts a profile called name with no filters, no scorers and the
// deterministic TopPicker.
func Profile(name string) *ProfileBuilder {
	return &ProfileBuilder{p: scheduling.Profile{Name: name, PickerName: "top-picker", Picker: &TopPicker{}}}
}

// Filter appends a filter, named after its Go type in traces.
func (b *ProfileBuilder) Filter(f scheduling.Filter) *ProfileBuilder {
	b.p.Filters = append(b.p.Filters, scheduling.NamedFilter{Name: typeName(f), Filter: f})
	return b
}

// Scorer appends a scorer with a weight, named after its Go type in traces.
func (b *ProfileBuilder) Scorer(s scheduling.Scorer, weight float64) *ProfileBuilder {
	b.p.Scorers = append(b.p.Scorers, scheduling.WeightedScorer{Name: typeName(s), Scorer: s, Weight: weight})
	return b
}

// Picker sets the picker.
func (b *ProfileBuilder) Picker(p scheduling.Picker) *ProfileBuilder {
	b.p.Picker, b.p.PickerName = p, typeName(p)
	return b
}

// Build returns the profile. Each call returns a new value.
func (b *ProfileBuilder) Build() *scheduling.Profile {
	p := b.p
	p.Filters = append([]scheduling.NamedFilter(nil), b.p.Filters...)
	p.Scorers = append([]scheduling.WeightedScorer(nil), b.p.Scorers...)
	return &p
}

// typeName is "scorers.Queue" for a *scorers.Queue.
func typeName(v any) string { return strings.TrimLeft(fmt.Sprintf("%T", v), "*") }

func orEmpty(req *scheduling.Request) *scheduling.Request {
	if req == nil {
		return &scheduling.Request{}
	}
	return req
}
