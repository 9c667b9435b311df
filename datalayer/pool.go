package datalayer

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
)

// Target is one model-server instance a discovery Source reports (a pod, a
// VM, a process). The Pool turns targets into endpoints.
type Target struct {
	Name    string `json:"name"`
	Address string `json:"address"` // an IPv4 or IPv6 address
	// Port serves inference. Zero means "the pool's target ports".
	Port   int               `json:"port,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Validate checks that t has a name, an IP address and a port in range.
func (t *Target) Validate() error {
	if t.Name == "" {
		return errors.New("missing name")
	}
	if t.Address == "" {
		return fmt.Errorf("%s: missing address", t.Name)
	}
	if _, err := netip.ParseAddr(t.Address); err != nil {
		return fmt.Errorf("%s: address %q is not an IP address", t.Name, t.Address)
	}
	if t.Port < 0 || t.Port > 65535 {
		return fmt.Errorf("%s: port %d out of range 1-65535", t.Name, t.Port)
	}
	return nil
}

// MaxTargetPorts is the most target ports a Pool may have.
const MaxTargetPorts = 8

// Pool selects the endpoints the picker schedules over: the targets whose
// labels match Selector, one endpoint per target port. The zero Pool selects
// every target at its own port.
type Pool struct {
	// Selector lists labels a target must carry with exactly these values;
	// empty selects every target.
	Selector map[string]string
	// TargetPorts are the inference ports of each target (at most 8). A
	// target without a port becomes one endpoint per target port, with Rank
	// the port's index, named "<name>-rank-<index>" when there are several. A
	// target with a port is selected when the port is one of TargetPorts
	// (Rank is its index) or when TargetPorts is empty (Rank 0).
	TargetPorts []int
}

// Validate checks the target ports: at most 8, in range, no duplicates.
func (p *Pool) Validate() error {
	if len(p.TargetPorts) > MaxTargetPorts {
		return fmt.Errorf("datalayer: pool: %d target ports, at most %d", len(p.TargetPorts), MaxTargetPorts)
	}
	for i, port := range p.TargetPorts {
		if port < 1 || port > 65535 {
			return fmt.Errorf("datalayer: pool: targetPorts[%d]: %d out of range 1-65535", i, port)
		}
		if j := slices.Index(p.TargetPorts, port); j < i {
			return fmt.Errorf("datalayer: pool: targetPorts[%d]: %d is also targetPorts[%d]", i, port, j)
		}
	}
	return nil
}

// Selects reports whether labels match the pool's selector.
func (p *Pool) Selects(labels map[string]string) bool {
	for k, v := range p.Selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Endpoints returns the endpoints p selects from targets, sorted by name,
// with fresh (never collected) metrics. Targets that are invalid, or whose
// endpoint name repeats an earlier one, are skipped; the error lists them.
func (p *Pool) Endpoints(targets []Target) ([]*Endpoint, error) {
	var errs []error
	out := make([]*Endpoint, 0, len(targets)*max(1, len(p.TargetPorts)))
	seen := make(map[string]bool, cap(out))
	add := func(t *Target, name string, port, rank int) {
		if seen[name] {
			errs = append(errs, fmt.Errorf("%s: duplicate endpoint name; skipped", name))
			return
		}
		seen[name] = true
		e := New(name, t.Address, port, maps.Clone(t.Labels))
		e.Rank = rank
		out = append(out, e)
	}
	for i := range targets {
		t := &targets[i]
		if err := t.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("targets[%d]: %w; skipped", i, err))
			continue
		}
		if !p.Selects(t.Labels) {
			continue
		}
		switch {
		case t.Port != 0 && len(p.TargetPorts) == 0:
			add(t, t.Name, t.Port, 0)
		case t.Port != 0:
			if rank := slices.Index(p.TargetPorts, t.Port); rank >= 0 {
				add(t, t.Name, t.Port, rank)
			}
		case len(p.TargetPorts) == 0:
			errs = append(errs, fmt.Errorf("%s: no port, and the pool has no target ports; skipped", t.Name))
		case len(p.TargetPorts) == 1:
			add(t, t.Name, p.TargetPorts[0], 0)
		default:
			for rank, port := range p.TargetPorts {
				add(t, t.Name+"-rank-"+strconv.Itoa(rank), port, rank)
			}
		}
	}
	slices.SortFunc(out, func(a, b *Endpoint) int { return cmpString(a.Name, b.Name) })
	if len(errs) > 0 {
		return out, fmt.Errorf("datalayer: %w", errors.Join(errs...))
	}
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
