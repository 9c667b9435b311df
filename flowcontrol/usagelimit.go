package flowcontrol

import (
	"errors"
	"fmt"
)

// StaticUsageLimit is the static-usage-limit-policy, the default: every band
// has the same ceiling, Threshold. At 1 (the default) the dispatcher serves
// until the pool is saturated; below 1 it keeps headroom.
type StaticUsageLimit struct {
	Threshold float64 `json:"threshold" doc:"the saturation ceiling of every band, in (0, 1]"`
}

var _ UsageLimitPolicy = (*StaticUsageLimit)(nil)

// SetDefaults sets Threshold to 1.
func (p *StaticUsageLimit) SetDefaults() { p.Threshold = 1 }

// Validate checks the threshold.
func (p *StaticUsageLimit) Validate() error {
	if !(p.Threshold > 0 && p.Threshold <= 1) {
		return fmt.Errorf("threshold: must be within (0, 1] (got %v)", p.Threshold)
	}
	return nil
}

// Ceilings sets every ceiling to Threshold.
func (p *StaticUsageLimit) Ceilings(_ float64, _ []int, ceilings []float64) {
	for i := range ceilings {
		ceilings[i] = p.Threshold
	}
}

// Priority-holdback domains.
const (
	HoldbackRank  = "rank"
	HoldbackValue = "value"
)

// PriorityHoldback is the priority-holdback-policy: ceilings fall linearly
// from MaxCeiling for the highest band to MinCeiling for the lowest, so as
// the pool saturates the lower bands are held back first and the headroom
// stays for higher ones. Domain rank spaces the bands evenly by their order;
// domain value places them by their priority value. With one band (or, by
// value, equal priorities) every ceiling is MaxCeiling.
//
// llm-d-router requires minCeiling; here it defaults to 0.5 so the plugin
// works without parameters, like every plugin.
type PriorityHoldback struct {
	Shape      string  `json:"shape" doc:"how ceilings fall from the highest to the lowest band: linear"`
	Domain     string  `json:"domain" doc:"rank: equal steps by band order; value: in proportion to the priority values"`
	MinCeiling float64 `json:"minCeiling" doc:"the lowest band's ceiling, in [0, 1)"`
	MaxCeiling float64 `json:"maxCeiling" doc:"the highest band's ceiling, in (0, 1]"`
}

var _ UsageLimitPolicy = (*PriorityHoldback)(nil)

// SetDefaults sets a linear, rank-based fall from 1 to 0.5.
func (p *PriorityHoldback) SetDefaults() {
	p.Shape, p.Domain, p.MinCeiling, p.MaxCeiling = "linear", HoldbackRank, 0.5, 1
}

// Validate checks the parameters.
func (p *PriorityHoldback) Validate() error {
	var errs []error
	if p.Shape != "linear" {
		errs = append(errs, fmt.Errorf("shape: want linear, got %q", p.Shape))
	}
	if p.Domain != HoldbackRank && p.Domain != HoldbackValue {
		errs = append(errs, fmt.Errorf("domain: want %q or %q, got %q", HoldbackRank, HoldbackValue, p.Domain))
	}
	if !(p.MinCeiling >= 0 && p.MinCeiling < 1) {
		errs = append(errs, fmt.Errorf("minCeiling: must be within [0, 1) (got %v)", p.MinCeiling))
	}
	if !(p.MaxCeiling > 0 && p.MaxCeiling <= 1) {
		errs = append(errs, fmt.Errorf("maxCeiling: must be within (0, 1] (got %v)", p.MaxCeiling))
	}
	if p.MinCeiling > p.MaxCeiling {
		errs = append(errs, fmt.Errorf("minCeiling %v: must not exceed maxCeiling %v", p.MinCeiling, p.MaxCeiling))
	}
	return errors.Join(errs...)
}

// Ceilings interpolates between MaxCeiling and MinCeiling.
func (p *PriorityHoldback) Ceilings(_ float64, prios []int, ceilings []float64) {
	n := len(prios)
	hi, lo := p.MaxCeiling, p.MinCeiling
	for i := range ceilings {
		r := 1.0 // position from the lowest (0) to the highest (1)
		switch {
		case n <= 1:
		case p.Domain == HoldbackValue:
			if top, bottom := prios[0], prios[n-1]; top != bottom {
				r = float64(prios[i]-bottom) / float64(top-bottom)
			}
		default:
			r = 1 - float64(i)/float64(n-1)
		}
		ceilings[i] = lo + r*(hi-lo)
	}
}
