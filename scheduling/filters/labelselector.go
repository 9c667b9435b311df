package filters

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// Operator is a label-selector requirement's operator.
type Operator string

// The operators of a LabelRequirement, with Kubernetes semantics.
const (
	In           Operator = "In"           // the label is set to one of Values
	NotIn        Operator = "NotIn"        // the label is unset or set to none of Values
	Exists       Operator = "Exists"       // the label is set (Values must be empty)
	DoesNotExist Operator = "DoesNotExist" // the label is unset (Values must be empty)
)

// LabelRequirement is one matchExpressions entry.
type LabelRequirement struct {
	Key      string   `json:"key"`
	Operator Operator `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// LabelSelector is the label-selector-filter: it keeps the endpoints whose
// labels match every MatchLabels pair and every MatchExpressions requirement,
// like a Kubernetes label selector. An empty selector keeps every endpoint.
type LabelSelector struct {
	MatchLabels      map[string]string  `json:"matchLabels,omitempty" doc:"labels an endpoint must carry with exactly these values"`
	MatchExpressions []LabelRequirement `json:"matchExpressions,omitempty" doc:"requirements {key, operator: In|NotIn|Exists|DoesNotExist, values} an endpoint must all meet"`

	// compiled is MatchLabels as In requirements (sorted by key) followed by
	// MatchExpressions, set by Init: a slice scan beats ranging over a map
	// for every endpoint.
	compiled []LabelRequirement
}

var (
	_ scheduling.Filter   = (*LabelSelector)(nil)
	_ plugins.Initializer = (*LabelSelector)(nil)
)

// Validate checks every requirement: a key, a known operator, values for In
// and NotIn and none for Exists and DoesNotExist.
func (f *LabelSelector) Validate() error {
	var errs []error
	for k := range f.MatchLabels {
		if k == "" {
			errs = append(errs, errors.New("label-selector-filter: matchLabels: empty label name"))
		}
	}
	for i, r := range f.MatchExpressions {
		if err := r.validate(); err != nil {
			errs = append(errs, fmt.Errorf("label-selector-filter: matchExpressions[%d].%w", i, err))
		}
	}
	return errors.Join(errs...)
}

func (r *LabelRequirement) validate() error {
	if r.Key == "" {
		return errors.New("key: must not be empty")
	}
	switch r.Operator {
	case In, NotIn:
		if len(r.Values) == 0 {
			return fmt.Errorf("values: operator %s needs at least one value", r.Operator)
		}
	case Exists, DoesNotExist:
		if len(r.Values) != 0 {
			return fmt.Errorf("values: operator %s takes no values", r.Operator)
		}
	default:
		return fmt.Errorf("operator: unknown operator %q (want In, NotIn, Exists or DoesNotExist)", r.Operator)
	}
	return nil
}

// Init prepares the selector for fast matching. Changing MatchLabels or
// MatchExpressions after Init has no effect.
func (f *LabelSelector) Init(context.Context, plugins.Deps) error {
	reqs := make([]LabelRequirement, 0, len(f.MatchLabels)+len(f.MatchExpressions))
	for _, k := range slices.Sorted(maps.Keys(f.MatchLabels)) {
		reqs = append(reqs, LabelRequirement{Key: k, Operator: In, Values: []string{f.MatchLabels[k]}})
	}
	f.compiled = append(reqs, f.MatchExpressions...)
	return nil
}

// Filter implements scheduling.Filter.
func (f *LabelSelector) Filter(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
	if len(f.MatchLabels) == 0 && len(f.MatchExpressions) == 0 {
		return eps
	}
	return keep(eps, f.Matches)
}

// Matches reports whether e's labels satisfy the selector. A requirement with
// an unknown operator matches nothing.
func (f *LabelSelector) Matches(e *scheduling.Endpoint) bool {
	if f.compiled != nil {
		for i := range f.compiled {
			if !f.compiled[i].matches(e.Labels) {
				return false
			}
		}
		return true
	}
	for k, v := range f.MatchLabels { // Init was not called
		if got, ok := e.Labels[k]; !ok || got != v {
			return false
		}
	}
	for i := range f.MatchExpressions {
		if !f.MatchExpressions[i].matches(e.Labels) {
			return false
		}
	}
	return true
}

func (r *LabelRequirement) matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case In:
		return ok && contains(r.Values, v)
	case NotIn:
		return !ok || !contains(r.Values, v)
	case Exists:
		return ok
	case DoesNotExist:
		return !ok
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
