package requestcontrol

import (
	"context"
	"fmt"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/scheduling"
)

// Record runs the producers and pre-request hooks for req as if the
// scheduler had picked endpoint, without scheduling: a way to replay where
// earlier requests went (warming the prefix index offline, the CLI's
// --history) or to mirror a decision made elsewhere. endpoint must be one of
// candidates.
func (d *Director) Record(ctx context.Context, req *scheduling.Request, candidates []*scheduling.Endpoint, endpoint *scheduling.Endpoint) error {
	found := false
	for _, c := range candidates {
		found = found || c == endpoint
	}
	if !found {
		return fmt.Errorf("requestcontrol: record: endpoint %s is not a candidate", endpoint.HostPort())
	}
	for _, p := range d.Producers {
		if err := p.Plugin.Produce(ctx, req, candidates); err != nil {
			for _, k := range p.Plugin.Produces() {
				req.Data.Delete(k.KeyName())
			}
		}
	}
	const profile = "recorded"
	res := &scheduling.Result{Primary: profile, Profiles: []scheduling.ProfileResult{
		{Profile: profile, Endpoints: []*scheduling.Endpoint{endpoint}},
	}}
	for _, h := range d.PreRequests {
		h.Plugin.PreRequest(ctx, req, res)
	}
	// The recorded request is over: release what the hooks counted in
	// flight, so a replayed history leaves no phantom load.
	d.Complete(ctx, req, endpoint, parsers.Usage{}, nil)
	return nil
}
