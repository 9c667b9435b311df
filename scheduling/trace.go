package scheduling

import (
	"fmt"
	"strings"
)

// Trace explains a scheduling decision. Set Request.Trace to a new Trace to
// record one; it is filled by the Scheduler as profiles run.
type Trace struct {
	Profiles []ProfileTrace `json:"profiles"`
	Primary  string         `json:"primary"`
}

// ProfileTrace is what happened in one profile run.
type ProfileTrace struct {
	Profile    string       `json:"profile"`
	Candidates []string     `json:"candidates"`
	Filters    []FilterStep `json:"filters,omitempty"`
	// Endpoints are the candidates left after filtering; every scorer's Scores
	// and Totals are aligned with them.
	Endpoints []string     `json:"endpoints,omitempty"`
	Scorers   []ScorerStep `json:"scorers,omitempty"`
	Totals    []float64    `json:"totals,omitempty"`
	Picker    string       `json:"picker,omitempty"`
	Picked    []string     `json:"picked,omitempty"`
	Reason    string       `json:"reason,omitempty"`
	Error     string       `json:"error,omitempty"`
}

// FilterStep records the endpoints one filter removed.
type FilterStep struct {
	Filter  string   `json:"filter"`
	Removed []string `json:"removed"`
}

// ScorerStep records one scorer's clamped scores.
type ScorerStep struct {
	Scorer string    `json:"scorer"`
	Weight float64   `json:"weight"`
	Scores []float64 `json:"scores"`
}

func names(eps []*Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.HostPort()
	}
	return out
}

func (t *Trace) startProfile(name string, candidates []*Endpoint) *ProfileTrace {
	t.Profiles = append(t.Profiles, ProfileTrace{Profile: name, Candidates: names(candidates)})
	return &t.Profiles[len(t.Profiles)-1]
}

func (pt *ProfileTrace) addFilter(name string, in, kept []*Endpoint) {
	keep := make(map[*Endpoint]bool, len(kept))
	for _, e := range kept {
		keep[e] = true
	}
	removed := []string{}
	for _, e := range in {
		if !keep[e] {
			removed = append(removed, e.HostPort())
		}
	}
	pt.Filters = append(pt.Filters, FilterStep{Filter: name, Removed: removed})
}

func (pt *ProfileTrace) finish(picker string, eps []*Endpoint, totals []float64, picked []*Endpoint) {
	pt.Totals = append([]float64(nil), totals...)
	pt.Picker = picker
	pt.Picked = names(picked)
	if len(picked) == 0 {
		pt.Reason = "picker returned no endpoint"
		return
	}
	best, ties, chosen := -1.0, 0, -1.0
	for i, e := range eps {
		if totals[i] > best {
			best, ties = totals[i], 0
		}
		if totals[i] == best {
			ties++
		}
		if e == picked[0] {
			chosen = totals[i]
		}
	}
	switch {
	case chosen < best:
		pt.Reason = fmt.Sprintf("%s chose %s with total %.4g below the best %.4g (not a max-score picker)", picker, picked[0].HostPort(), chosen, best)
	case ties > 1:
		pt.Reason = fmt.Sprintf("tie: %d endpoints share the highest total %.4g; broken randomly", ties, best)
	default:
		pt.Reason = fmt.Sprintf("highest total %.4g", best)
	}
	if len(picked) > 1 {
		pt.Reason += fmt.Sprintf("; fallbacks %s", strings.Join(pt.Picked[1:], ", "))
	}
}

// String renders the trace as an aligned table, one block per profile.
func (t *Trace) String() string {
	var b strings.Builder
	for _, p := range t.Profiles {
		fmt.Fprintf(&b, "profile %q: %d candidates\n", p.Profile, len(p.Candidates))
		for _, f := range p.Filters {
			if len(f.Removed) == 0 {
				fmt.Fprintf(&b, "  filter %-28s removed nothing\n", f.Filter)
			} else {
				fmt.Fprintf(&b, "  filter %-28s removed %s\n", f.Filter, strings.Join(f.Removed, ", "))
			}
		}
		if p.Error != "" {
			fmt.Fprintf(&b, "  error: %s\n", p.Error)
			continue
		}
		if len(p.Endpoints) > 0 {
			fmt.Fprintf(&b, "  %-36s", "endpoint")
			for _, s := range p.Scorers {
				fmt.Fprintf(&b, " %s×%g", s.Scorer, s.Weight)
			}
			fmt.Fprintf(&b, " | total\n")
			for i, e := range p.Endpoints {
				fmt.Fprintf(&b, "  %-36s", e)
				for _, s := range p.Scorers {
					fmt.Fprintf(&b, " %*.4f", len(s.Scorer)+len(fmt.Sprint(s.Weight))+1, s.Scores[i])
				}
				fmt.Fprintf(&b, " | %.4f\n", p.Totals[i])
			}
		}
		fmt.Fprintf(&b, "  picker %s picked %s: %s\n", p.Picker, strings.Join(p.Picked, ", "), p.Reason)
	}
	if t.Primary != "" {
		fmt.Fprintf(&b, "primary profile: %s\n", t.Primary)
	}
	return b.String()
}
