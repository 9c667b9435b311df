package customplugins

import (
	"context"
	"errors"
	"time"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// FreshMetrics is a filter that keeps the endpoints whose metrics are usable
// and at most MaxAge old, so an endpoint whose /metrics stopped answering
// stops attracting requests on its last good numbers. When no endpoint is
// fresh it keeps them all: a filter that removes every candidate turns the
// request into a 429.
//
// Filter runs concurrently for different requests; the plugin keeps no
// state besides its clock, set once by Init.
type FreshMetrics struct {
	MaxAge plugins.Duration `json:"maxAge" doc:"oldest metrics an endpoint may have and still be kept"`

	clock plugins.Clock
}

var (
	_ scheduling.Filter   = (*FreshMetrics)(nil)
	_ plugins.Initializer = (*FreshMetrics)(nil)
)

// SetDefaults runs before the parameters are decoded: one second.
func (f *FreshMetrics) SetDefaults() { f.MaxAge = plugins.Duration(time.Second) }

// Validate checks the parameters after decoding.
func (f *FreshMetrics) Validate() error {
	if f.MaxAge <= 0 {
		return errors.New("maxAge: must be > 0")
	}
	return nil
}

// Init takes the clock from the injected dependencies, so tests and the
// simulator control time.
func (f *FreshMetrics) Init(_ context.Context, deps plugins.Deps) error {
	f.clock = deps.Clock
	return nil
}

// Filter implements scheduling.Filter. It returns eps itself when it keeps
// every endpoint, and never modifies eps or the endpoints.
func (f *FreshMetrics) Filter(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
	now := time.Now()
	if f.clock != nil {
		now = f.clock.Now()
	}
	fresh := func(e *scheduling.Endpoint) bool {
		return e.Metrics.Usable() && e.Metrics.Age(now) <= time.Duration(f.MaxAge)
	}
	n := 0
	for _, e := range eps {
		if fresh(e) {
			n++
		}
	}
	if n == 0 || n == len(eps) {
		return eps
	}
	kept := make([]*scheduling.Endpoint, 0, n)
	for _, e := range eps {
		if fresh(e) {
			kept = append(kept, e)
		}
	}
	return kept
}
