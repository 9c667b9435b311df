package scheduling

import (
	"context"
	"fmt"
	"sync"
)

// NamedFilter is a filter with its instance name (for traces and errors).
type NamedFilter struct {
	Name   string
	Filter Filter
}

// WeightedScorer is a scorer with its instance name and weight.
type WeightedScorer struct {
	Name   string
	Scorer Scorer
	Weight float64
}

// Profile is a named chain of filters, weighted scorers and a picker.
type Profile struct {
	Name       string
	Filters    []NamedFilter
	Scorers    []WeightedScorer
	PickerName string
	Picker     Picker
}

// Scheduler runs profiles under a profile handler. It is safe for concurrent
// use once built.
type Scheduler struct {
	handler  ProfileHandler
	profiles []*Profile
	names    []string
}

// New returns a scheduler. Profile names must be unique and every profile
// needs a picker.
func New(handler ProfileHandler, profiles ...*Profile) (*Scheduler, error) {
	if handler == nil {
		return nil, fmt.Errorf("scheduling: nil profile handler")
	}
	if len(profiles) == 0 {
		return nil, fmt.Errorf("scheduling: no profiles")
	}
	s := &Scheduler{handler: handler, profiles: profiles}
	seen := map[string]bool{}
	for _, p := range profiles {
		if seen[p.Name] {
			return nil, fmt.Errorf("scheduling: duplicate profile %q", p.Name)
		}
		if p.Picker == nil {
			return nil, fmt.Errorf("scheduling: profile %q has no picker", p.Name)
		}
		seen[p.Name] = true
		s.names = append(s.names, p.Name)
	}
	if c, ok := handler.(ProfileChecker); ok {
		if err := c.CheckProfiles(s.names); err != nil {
			return nil, fmt.Errorf("scheduling: profile handler: %w", err)
		}
	}
	return s, nil
}

// Profiles returns the profiles in configuration order.
func (s *Scheduler) Profiles() []*Profile { return s.profiles }

// Schedule picks endpoints for req among candidates.
func (s *Scheduler) Schedule(ctx context.Context, req *Request, candidates []*Endpoint) (*Result, error) {
	if len(candidates) == 0 {
		return nil, ErrNoCandidates
	}
	res := &Result{Profiles: make([]ProfileResult, 0, len(s.profiles))}
	run := func(ctx context.Context, name string) (ProfileResult, error) {
		p := s.profile(name)
		if p == nil {
			return ProfileResult{}, fmt.Errorf("%w %q", ErrUnknownProfile, name)
		}
		pr, err := p.Run(ctx, req, candidates)
		if err != nil {
			return pr, err
		}
		res.Profiles = append(res.Profiles, pr)
		return pr, nil
	}
	primary, err := s.handler.Handle(ctx, req, s.names, run)
	if err != nil {
		return nil, err
	}
	res.Primary = primary
	if req.Trace != nil {
		req.Trace.Primary = primary
	}
	if res.PrimaryResult() == nil {
		return nil, fmt.Errorf("scheduling: profile handler chose primary %q, which did not run", primary)
	}
	return res, nil
}

func (s *Scheduler) profile(name string) *Profile {
	for _, p := range s.profiles {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// scratch holds per-run buffers, pooled so a cycle does not allocate them.
type scratch struct{ scores, totals []float64 }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Run runs the profile: filters, scorers, picker.
func (p *Profile) Run(ctx context.Context, req *Request, candidates []*Endpoint) (ProfileResult, error) {
	var pt *ProfileTrace
	if req.Trace != nil {
		pt = req.Trace.startProfile(p.Name, candidates)
	}
	eps := candidates
	for _, f := range p.Filters {
		kept := f.Filter.Filter(ctx, req, eps)
		if pt != nil {
			pt.addFilter(f.Name, eps, kept)
		}
		eps = kept
		if len(eps) == 0 {
			err := fmt.Errorf("%w (profile %q, filter %q)", ErrAllFiltered, p.Name, f.Name)
			if pt != nil {
				pt.Error = err.Error()
			}
			return ProfileResult{Profile: p.Name}, err
		}
	}
	n := len(eps)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	sc.scores = grow(sc.scores, n)
	sc.totals = grow(sc.totals, n)
	totals := sc.totals
	clear(totals)
	if pt != nil {
		pt.Endpoints = names(eps)
	}
	for _, ws := range p.Scorers {
		scores := sc.scores
		clear(scores)
		ws.Scorer.Score(ctx, req, eps, scores)
		for i, v := range scores {
			v = Clamp01(v)
			scores[i] = v
			totals[i] += ws.Weight * v
		}
		if pt != nil {
			pt.Scorers = append(pt.Scorers, ScorerStep{Scorer: ws.Name, Weight: ws.Weight, Scores: append([]float64(nil), scores...)})
		}
	}
	picked := p.Picker.Pick(ctx, req, eps, totals)
	if pt != nil {
		pt.finish(p.PickerName, eps, totals, picked)
	}
	if len(picked) == 0 {
		return ProfileResult{Profile: p.Name}, fmt.Errorf("%w (profile %q: picker %q picked nothing)", ErrAllFiltered, p.Name, p.PickerName)
	}
	return ProfileResult{Profile: p.Name, Endpoints: picked}, nil
}

func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

// Clamp01 is the runtime's clamping of a score: NaN and negatives → 0, above 1 → 1.
func Clamp01(v float64) float64 {
	switch {
	case v > 1:
		return 1
	case v >= 0:
		return v
	default: // negative or NaN
		return 0
	}
}
