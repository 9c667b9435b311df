package scheduling

import (
	"context"
	"errors"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
)

// Endpoint is the endpoint snapshot plugins read.
type Endpoint = datalayer.Endpoint

// Request is one inference request as scheduling plugins see it. It lives for
// one request and is never shared between requests.
type Request struct {
	ID string
	// IncomingModel is the model the client asked for; TargetModel the one
	// after rewrite (what the engine serves and what prefix hashing uses).
	IncomingModel string
	TargetModel   string
	Body          *parsers.Body
	// Headers are the request headers with lower-case names.
	Headers  map[string]string
	Priority int
	// Data is the per-request typed state written by data producers.
	Data plugins.Values
	// Trace, when non-nil, receives the decision trace.
	Trace *Trace
	// AddedHeaders are headers plugins want added to the forwarded request
	// (e.g. x-prefiller-host-port).
	AddedHeaders map[string]string
}

// SetHeader records a header to add to the forwarded request.
func (r *Request) SetHeader(name, value string) {
	if r.AddedHeaders == nil {
		r.AddedHeaders = map[string]string{}
	}
	r.AddedHeaders[name] = value
}

// Filter removes endpoints that must not serve the request. It returns the
// kept endpoints in their original order: the input slice itself when it keeps
// all of them, otherwise a new slice. It must not modify the input slice.
type Filter interface {
	Filter(ctx context.Context, req *Request, endpoints []*Endpoint) []*Endpoint
}

// FilterFunc adapts a function to Filter.
type FilterFunc func(ctx context.Context, req *Request, endpoints []*Endpoint) []*Endpoint

// Filter calls f.
func (f FilterFunc) Filter(ctx context.Context, req *Request, eps []*Endpoint) []*Endpoint {
	return f(ctx, req, eps)
}

// Scorer rates every endpoint for the request: scores[i] is for endpoints[i],
// in [0,1] (higher is better; the runtime clamps). scores has len(endpoints)
// entries, is zeroed, and is owned by the runtime: do not keep it. Score is
// called concurrently for different requests.
type Scorer interface {
	Score(ctx context.Context, req *Request, endpoints []*Endpoint, scores []float64)
}

// ScorerFunc adapts a function to Scorer.
type ScorerFunc func(ctx context.Context, req *Request, endpoints []*Endpoint, scores []float64)

// Score calls f.
func (f ScorerFunc) Score(ctx context.Context, req *Request, eps []*Endpoint, scores []float64) {
	f(ctx, req, eps, scores)
}

// Picker chooses endpoints from the candidates given each one's weighted total
// (totals[i] for endpoints[i]). It returns the primary first, then fallbacks;
// at least one endpoint when endpoints is non-empty. It must not keep or modify
// either slice.
type Picker interface {
	Pick(ctx context.Context, req *Request, endpoints []*Endpoint, totals []float64) []*Endpoint
}

// PickerFunc adapts a function to Picker.
type PickerFunc func(ctx context.Context, req *Request, endpoints []*Endpoint, totals []float64) []*Endpoint

// Pick calls f.
func (f PickerFunc) Pick(ctx context.Context, req *Request, eps []*Endpoint, totals []float64) []*Endpoint {
	return f(ctx, req, eps, totals)
}

// RunProfileFunc runs the named profile over the request's candidates and
// records its result.
type RunProfileFunc func(ctx context.Context, profile string) (ProfileResult, error)

// ProfileHandler decides which profiles run, in what order, and which
// profile's result is primary. profiles are the configured names in order.
type ProfileHandler interface {
	Handle(ctx context.Context, req *Request, profiles []string, run RunProfileFunc) (primary string, err error)
}

// ProfileChecker is implemented by profile handlers that can check the
// configured profile names at load time (e.g. that a named default exists).
type ProfileChecker interface {
	CheckProfiles(profiles []string) error
}

// ProfileHandlerFunc adapts a function to ProfileHandler.
type ProfileHandlerFunc func(ctx context.Context, req *Request, profiles []string, run RunProfileFunc) (string, error)

// Handle calls f.
func (f ProfileHandlerFunc) Handle(ctx context.Context, req *Request, profiles []string, run RunProfileFunc) (string, error) {
	return f(ctx, req, profiles, run)
}

// ProfileResult is what one profile picked: primary first, then fallbacks.
type ProfileResult struct {
	Profile   string
	Endpoints []*Endpoint
}

// Result is the outcome of a scheduling cycle.
type Result struct {
	Primary  string          // name of the primary profile
	Profiles []ProfileResult // every profile that ran, in run order
}

// PrimaryResult returns the primary profile's result, or nil.
func (r *Result) PrimaryResult() *ProfileResult { return r.Get(r.Primary) }

// Get returns the named profile's result, or nil if it did not run.
func (r *Result) Get(profile string) *ProfileResult {
	for i := range r.Profiles {
		if r.Profiles[i].Profile == profile {
			return &r.Profiles[i]
		}
	}
	return nil
}

// Errors of a scheduling cycle.
var (
	// ErrNoCandidates means the request had no candidate endpoints (503).
	ErrNoCandidates = errors.New("scheduling: no candidate endpoints")
	// ErrAllFiltered means the filters removed every endpoint (429).
	ErrAllFiltered = errors.New("scheduling: filters removed every endpoint")
	// ErrUnknownProfile means a profile handler asked for a profile that does
	// not exist.
	ErrUnknownProfile = errors.New("scheduling: unknown profile")
)
