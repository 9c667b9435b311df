package inflight

import (
	"context"
	"errors"
	"sync"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// Token release points.
const (
	ReleaseOnFirstChunk = "firstChunk"
	ReleaseOnCompletion = "completion"
)

// Producer is the inflight-load-producer plugin.
type Producer struct {
	ReleaseTokensOn string `json:"releaseTokensOn" doc:"when a request's prompt tokens stop counting: firstChunk (prefill done) or completion"`

	once    sync.Once
	name    string
	key     plugins.Key[scorers.InFlightSource]
	loadKey plugins.Key[*requestcontrol.Load]
	tracker requestcontrol.LoadTracker
}

var (
	_ requestcontrol.DataProducer     = (*Producer)(nil)
	_ requestcontrol.PreRequest       = (*Producer)(nil)
	_ requestcontrol.ResponseChunk    = (*Producer)(nil)
	_ requestcontrol.ResponseComplete = (*Producer)(nil)
	_ datalayer.EndpointListener      = (*Producer)(nil)
	_ scorers.InFlightSource          = (*requestcontrol.LoadTracker)(nil)
)

// SetDefaults releases tokens on the first chunk.
func (p *Producer) SetDefaults() { p.ReleaseTokensOn = ReleaseOnFirstChunk }

// Validate checks releaseTokensOn.
func (p *Producer) Validate() error {
	switch p.ReleaseTokensOn {
	case ReleaseOnFirstChunk, ReleaseOnCompletion, "":
		return nil
	}
	return errors.New(`releaseTokensOn: want "firstChunk" or "completion", got "` + p.ReleaseTokensOn + `"`)
}

// Init names the data key after the instance.
func (p *Producer) Init(_ context.Context, deps plugins.Deps) error {
	p.name = deps.Name
	p.ready()
	return nil
}

func (p *Producer) ready() {
	p.once.Do(func() {
		if p.name == "" {
			p.name = scorers.DefaultInFlightProducer
		}
		p.key = scorers.InFlightKey(p.name)
		p.loadKey = plugins.NewKey[*requestcontrol.Load]("inflight-load-ticket/" + p.name)
	})
}

// Tracker returns the producer's counters.
func (p *Producer) Tracker() *requestcontrol.LoadTracker { return &p.tracker }

// Produces returns the in-flight key named after the instance.
func (p *Producer) Produces() []plugins.AnyKey {
	p.ready()
	return []plugins.AnyKey{p.key}
}

// Produce publishes the counters to the request.
func (p *Producer) Produce(_ context.Context, req *scheduling.Request, _ []*scheduling.Endpoint) error {
	p.ready()
	plugins.Set[scorers.InFlightSource](&req.Data, p.key, &p.tracker)
	return nil
}

// PreRequest counts the request on its primary endpoint.
func (p *Producer) PreRequest(_ context.Context, req *scheduling.Request, res *scheduling.Result) {
	p.ready()
	primary := res.PrimaryResult()
	if primary == nil || len(primary.Endpoints) == 0 {
		return
	}
	tokens := 0
	if req.Body != nil {
		tokens = req.Body.TokenEstimate()
	}
	plugins.Set(&req.Data, p.loadKey, p.tracker.Start(primary.Endpoints[0], int64(tokens)))
}

// ResponseChunk releases the tokens at the first chunk.
func (p *Producer) ResponseChunk(_ context.Context, req *scheduling.Request, _ *scheduling.Endpoint, _ []byte) {
	if p.ReleaseTokensOn == ReleaseOnCompletion {
		return
	}
	p.ready()
	if l, ok := plugins.Get(&req.Data, p.loadKey); ok {
		l.ReleaseTokens()
	}
}

// ResponseComplete releases the request.
func (p *Producer) ResponseComplete(_ context.Context, req *scheduling.Request, _ *scheduling.Endpoint, _ parsers.Usage, _ error) {
	p.ready()
	if l, ok := plugins.Get(&req.Data, p.loadKey); ok {
		l.Release()
	}
}

// EndpointAdded does nothing: a new endpoint has nothing in flight.
func (p *Producer) EndpointAdded(*datalayer.Endpoint) {}

// EndpointRemoved drops the endpoint's counters.
func (p *Producer) EndpointRemoved(e *datalayer.Endpoint) { p.tracker.Forget(e) }
