package requestcontrol

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// ModelRewrite is one InferenceModelRewrite resource: its rules in order.
type ModelRewrite struct {
	Name  string // metadata.name, for logs
	Rules []RewriteRule
}

// RewriteRule matches incoming model names and rewrites them to one of its
// targets, drawn by weight.
type RewriteRule struct {
	// Models are the exact model names the rule matches; none matches every
	// model (a catch-all rule).
	Models  []string
	Targets []RewriteTarget
}

// RewriteTarget is a weighted target model. When every target of a rule has
// weight 0 (unset) they are drawn uniformly; otherwise a target with weight
// 0 is never drawn.
type RewriteTarget struct {
	Model  string
	Weight int
}

// ModelRewrites is a compiled set of rewrite rules, safe for concurrent use.
// An exact match beats a catch-all rule; among exact matches, and among
// catch-alls, the first rule of the first resource wins.
type ModelRewrites struct {
	exact    map[string]*compiled
	catchAll *compiled
}

type compiled struct {
	resource string
	targets  []RewriteTarget
	total    int
}

// NewModelRewrites compiles rewrites. Every rule needs a target with a model
// name, and weights must be ≥ 0.
func NewModelRewrites(rewrites ...ModelRewrite) (*ModelRewrites, error) {
	m := &ModelRewrites{exact: map[string]*compiled{}}
	var errs []error
	for i, rw := range rewrites {
		for j, r := range rw.Rules {
			at := fmt.Sprintf("model rewrite %q rules[%d]", rw.Name, j)
			if rw.Name == "" {
				at = fmt.Sprintf("model rewrite %d rules[%d]", i, j)
			}
			c := &compiled{resource: rw.Name, targets: r.Targets}
			if len(r.Targets) == 0 {
				errs = append(errs, fmt.Errorf("%s: no targets", at))
				continue
			}
			for k, t := range r.Targets {
				switch {
				case t.Model == "":
					errs = append(errs, fmt.Errorf("%s.targets[%d]: missing modelRewrite", at, k))
				case t.Weight < 0:
					errs = append(errs, fmt.Errorf("%s.targets[%d].weight: must be ≥ 0", at, k))
				}
				c.total += max(t.Weight, 0)
			}
			if len(r.Models) == 0 {
				if m.catchAll == nil {
					m.catchAll = c
				}
				continue
			}
			for _, model := range r.Models {
				if _, dup := m.exact[model]; !dup {
					m.exact[model] = c
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("requestcontrol: %w", errors.Join(errs...))
	}
	return m, nil
}

// Target returns the model to rewrite model to, drawn with rnd, and the
// name of the resource whose rule matched; ok is false when no rule matches.
func (m *ModelRewrites) Target(model string, rnd *rand.Rand) (target, resource string, ok bool) {
	if m == nil {
		return "", "", false
	}
	c := m.exact[model]
	if c == nil {
		c = m.catchAll
	}
	if c == nil {
		return "", "", false
	}
	if c.total == 0 {
		return c.targets[rnd.IntN(len(c.targets))].Model, c.resource, true
	}
	r := rnd.IntN(c.total)
	for _, t := range c.targets {
		if r -= max(t.Weight, 0); r < 0 {
			return t.Model, c.resource, true
		}
	}
	return c.targets[len(c.targets)-1].Model, c.resource, true
}
