package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/eppkit/eppkit/datalayer"
)

// Static is the static-discovery plugin: a fixed list of endpoints.
type Static struct {
	Endpoints []datalayer.Target `json:"endpoints,omitempty" doc:"the endpoints: name, address, port, labels"`
}

var _ datalayer.Source = (*Static)(nil)

// Validate checks every target and that names are unique.
func (s *Static) Validate() error { return validateTargets(s.Endpoints) }

// Run reports the list once and waits for ctx.
func (s *Static) Run(ctx context.Context, update func([]datalayer.Target)) error {
	update(slices.Clone(s.Endpoints))
	<-ctx.Done()
	return nil
}

func validateTargets(ts []datalayer.Target) error {
	var errs []error
	seen := make(map[string]int, len(ts))
	for i := range ts {
		if err := ts[i].Validate(); err != nil {
			errs = append(errs, fmt.Errorf("endpoints[%d]: %w", i, err))
			continue
		}
		if j, dup := seen[ts[i].Name]; dup {
			errs = append(errs, fmt.Errorf("endpoints[%d]: name %q is also endpoints[%d]", i, ts[i].Name, j))
			continue
		}
		seen[ts[i].Name] = i
	}
	return errors.Join(errs...)
}
