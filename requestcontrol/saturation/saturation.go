package saturation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
)

// Stale-metrics policies of the utilization detector.
const (
	// StaleSaturated counts an endpoint with stale or missing metrics as
	// saturated (1.0), as llm-d-router does: a fleet-wide scrape failure
	// sheds sheddable traffic rather than admitting it blind.
	StaleSaturated = "saturated"
	// StaleIgnore leaves such endpoints out of the mean (and out of the
	// filter's judgement); when every endpoint is stale the pool counts as
	// idle.
	StaleIgnore = "ignore"
)

// Utilization is the utilization-detector plugin.
type Utilization struct {
	QueueDepthThreshold       int              `json:"queueDepthThreshold" doc:"waiting requests at which an endpoint counts as saturated (> 0)"`
	KVCacheUtilThreshold      float64          `json:"kvCacheUtilThreshold" doc:"KV-cache usage at which an endpoint counts as saturated, in (0, 1]"`
	MetricsStalenessThreshold plugins.Duration `json:"metricsStalenessThreshold" doc:"age beyond which an endpoint's metrics are stale"`
	Headroom                  float64          `json:"headroom" doc:"burst allowance of the filter above the thresholds, as a fraction (0.2 = 20%)"`
	StalenessPolicy           string           `json:"stalenessPolicy" doc:"how endpoints with stale metrics count: saturated or ignore"`

	clock plugins.Clock
}

var (
	_ requestcontrol.SaturationDetector = (*Utilization)(nil)
	_ scheduling.Filter                 = (*Utilization)(nil)
)

// SetDefaults sets the llm-d-router defaults.
func (u *Utilization) SetDefaults() {
	u.QueueDepthThreshold = 5
	u.KVCacheUtilThreshold = 0.8
	u.MetricsStalenessThreshold = plugins.Duration(200 * time.Millisecond)
	u.StalenessPolicy = StaleSaturated
}

// Validate checks the parameters.
func (u *Utilization) Validate() error {
	var errs []error
	if u.QueueDepthThreshold <= 0 {
		errs = append(errs, errors.New("queueDepthThreshold: must be > 0"))
	}
	if !(u.KVCacheUtilThreshold > 0 && u.KVCacheUtilThreshold <= 1) {
		errs = append(errs, errors.New("kvCacheUtilThreshold: must be within (0, 1]"))
	}
	if u.MetricsStalenessThreshold <= 0 {
		errs = append(errs, errors.New("metricsStalenessThreshold: must be > 0"))
	}
	if !(u.Headroom >= 0) {
		errs = append(errs, errors.New("headroom: must be ≥ 0"))
	}
	if u.StalenessPolicy != StaleSaturated && u.StalenessPolicy != StaleIgnore {
		errs = append(errs, fmt.Errorf("stalenessPolicy: want %q or %q, got %q", StaleSaturated, StaleIgnore, u.StalenessPolicy))
	}
	return errors.Join(errs...)
}

// Init takes the clock that judges staleness.
func (u *Utilization) Init(_ context.Context, deps plugins.Deps) error {
	u.clock = deps.Clock
	return nil
}

func (u *Utilization) params() (q, kv float64, stale time.Duration, ignore bool, now time.Time) {
	q, kv, stale = float64(u.QueueDepthThreshold), u.KVCacheUtilThreshold, time.Duration(u.MetricsStalenessThreshold)
	if q <= 0 {
		q = 5
	}
	if kv <= 0 {
		kv = 0.8
	}
	if stale <= 0 {
		stale = 200 * time.Millisecond
	}
	if u.clock != nil {
		now = u.clock.Now()
	} else {
		now = time.Now()
	}
	return q, kv, stale, u.StalenessPolicy == StaleIgnore, now
}

func fresh(m *datalayer.Metrics, now time.Time, stale time.Duration) bool {
	return m.Usable() && now.Sub(m.UpdateTime) <= stale
}

// Saturation returns the mean over endpoints of max(W/queueDepthThreshold,
// kvUsage/kvCacheUtilThreshold). An empty pool is saturated (1).
func (u *Utilization) Saturation(_ context.Context, eps []*datalayer.Endpoint) float64 {
	if len(eps) == 0 {
		return 1
	}
	q, kv, stale, ignore, now := u.params()
	total, n := 0.0, 0
	for _, e := range eps {
		if !fresh(&e.Metrics, now, stale) {
			if !ignore {
				total++
				n++
			}
			continue
		}
		total += max(float64(e.Metrics.Waiting)/q, e.Metrics.KVUsage/kv)
		n++
	}
	if n == 0 {
		return 0
	}
	return total / float64(n)
}

// Filter keeps the endpoints under both limits (threshold × (1 + headroom);
// the KV limit at most 1). Endpoints with stale metrics are removed under
// the saturated policy and kept under ignore. When no endpoint qualifies it
// keeps them all (fail open: the scorers pick the least bad).
func (u *Utilization) Filter(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
	q, kv, stale, ignore, now := u.params()
	h := max(u.Headroom, 0)
	qLimit, kvLimit := q*(1+h), min(1, kv*(1+h))
	kept := keep(eps, func(e *scheduling.Endpoint) bool {
		if !fresh(&e.Metrics, now, stale) {
			return ignore
		}
		return float64(e.Metrics.Waiting) < qLimit && e.Metrics.KVUsage < kvLimit
	})
	if len(kept) == 0 {
		return eps
	}
	return kept
}

// Concurrency modes.
const (
	ModeRequests = "requests"
	ModeTokens   = "tokens"
	ModeHybrid   = "hybrid"
)

// Concurrency is the concurrency-detector plugin. It counts requests (and
// their prompt tokens) per endpoint itself, from the pick (PreRequest) to the
// end of the response (ResponseComplete), so it needs no metrics and reacts
// at once to a burst.
type Concurrency struct {
	ConcurrencyMode     string  `json:"concurrencyMode" doc:"what counts: requests, tokens, or hybrid (the more constrained of both)"`
	MaxConcurrency      int64   `json:"maxConcurrency" doc:"in-flight requests per endpoint at saturation (> 0)"`
	MaxTokenConcurrency int64   `json:"maxTokenConcurrency" doc:"in-flight prompt tokens per endpoint at saturation (> 0)"`
	Headroom            float64 `json:"headroom" doc:"burst allowance of the filter above the limits, as a fraction"`

	tracker requestcontrol.LoadTracker
	key     plugins.Key[*requestcontrol.Load]
}

var (
	_ requestcontrol.SaturationDetector = (*Concurrency)(nil)
	_ scheduling.Filter                 = (*Concurrency)(nil)
	_ requestcontrol.PreRequest         = (*Concurrency)(nil)
	_ requestcontrol.ResponseComplete   = (*Concurrency)(nil)
	_ datalayer.EndpointListener        = (*Concurrency)(nil)
)

// SetDefaults sets the llm-d-router defaults.
func (c *Concurrency) SetDefaults() {
	c.ConcurrencyMode = ModeRequests
	c.MaxConcurrency = 100
	c.MaxTokenConcurrency = 1_000_000
}

// Validate checks the parameters.
func (c *Concurrency) Validate() error {
	var errs []error
	switch c.ConcurrencyMode {
	case ModeRequests, ModeTokens, ModeHybrid:
	default:
		errs = append(errs, fmt.Errorf("concurrencyMode: want requests, tokens or hybrid, got %q", c.ConcurrencyMode))
	}
	if c.MaxConcurrency <= 0 {
		errs = append(errs, errors.New("maxConcurrency: must be > 0"))
	}
	if c.MaxTokenConcurrency <= 0 {
		errs = append(errs, errors.New("maxTokenConcurrency: must be > 0"))
	}
	if !(c.Headroom >= 0) {
		errs = append(errs, errors.New("headroom: must be ≥ 0"))
	}
	return errors.Join(errs...)
}

// Init names the per-request key after the instance.
func (c *Concurrency) Init(_ context.Context, deps plugins.Deps) error {
	c.key = plugins.NewKey[*requestcontrol.Load]("concurrency-detector/" + deps.Name)
	return nil
}

func (c *Concurrency) limits() (reqs, toks int64, mode string) {
	reqs, toks, mode = c.MaxConcurrency, c.MaxTokenConcurrency, c.ConcurrencyMode
	if reqs <= 0 {
		reqs = 100
	}
	if toks <= 0 {
		toks = 1_000_000
	}
	if mode == "" {
		mode = ModeRequests
	}
	return
}

// Saturation returns the pool's in-flight load over its capacity: Σ requests
// / (endpoints × maxConcurrency), the same in tokens, or the larger of the
// two in hybrid mode. An empty pool is saturated (1).
func (c *Concurrency) Saturation(_ context.Context, eps []*datalayer.Endpoint) float64 {
	if len(eps) == 0 {
		return 1
	}
	maxR, maxT, mode := c.limits()
	var r, t int64
	for _, e := range eps {
		er, et := c.tracker.InFlight(e)
		r += er
		t += et
	}
	n := float64(len(eps))
	sr, st := float64(r)/(n*float64(maxR)), float64(t)/(n*float64(maxT))
	switch mode {
	case ModeTokens:
		return st
	case ModeHybrid:
		return max(sr, st)
	}
	return sr
}

// Filter keeps the endpoints under their limit × (1 + headroom) in the
// mode's dimension (both, in hybrid mode). It may keep none: the request is
// then rejected as saturated.
func (c *Concurrency) Filter(_ context.Context, _ *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
	maxR, maxT, mode := c.limits()
	h := 1 + max(c.Headroom, 0)
	rLimit, tLimit := float64(maxR)*h, float64(maxT)*h
	return keep(eps, func(e *scheduling.Endpoint) bool {
		r, t := c.tracker.InFlight(e)
		ok := true
		if mode != ModeTokens {
			ok = float64(r) < rLimit
		}
		if mode != ModeRequests {
			ok = ok && float64(t) < tLimit
		}
		return ok
	})
}

// PreRequest counts the request on its primary endpoint.
func (c *Concurrency) PreRequest(_ context.Context, req *scheduling.Request, res *scheduling.Result) {
	primary := res.PrimaryResult()
	if primary == nil || len(primary.Endpoints) == 0 {
		return
	}
	tokens := 0
	if req.Body != nil {
		tokens = req.Body.TokenEstimate()
	}
	plugins.Set(&req.Data, c.dataKey(), c.tracker.Start(primary.Endpoints[0], int64(tokens)))
}

// ResponseComplete releases the request.
func (c *Concurrency) ResponseComplete(_ context.Context, req *scheduling.Request, _ *scheduling.Endpoint, _ parsers.Usage, _ error) {
	if l, ok := plugins.Get(&req.Data, c.dataKey()); ok {
		l.Release()
	}
}

func (c *Concurrency) dataKey() plugins.Key[*requestcontrol.Load] {
	if c.key.KeyName() == "" {
		return plugins.NewKey[*requestcontrol.Load]("concurrency-detector/concurrency-detector")
	}
	return c.key
}

// Tracker returns the detector's counters.
func (c *Concurrency) Tracker() *requestcontrol.LoadTracker { return &c.tracker }

// EndpointAdded does nothing.
func (c *Concurrency) EndpointAdded(*datalayer.Endpoint) {}

// EndpointRemoved drops the endpoint's counters.
func (c *Concurrency) EndpointRemoved(e *datalayer.Endpoint) { c.tracker.Forget(e) }

// keep returns the endpoints ok accepts, in order: eps itself when it
// accepts all, a new slice otherwise.
func keep(eps []*scheduling.Endpoint, ok func(*scheduling.Endpoint) bool) []*scheduling.Endpoint {
	var kept []*scheduling.Endpoint
	dropped := false
	for i, e := range eps {
		switch good := ok(e); {
		case good && dropped:
			kept = append(kept, e)
		case !good && !dropped:
			dropped = true
			kept = append(make([]*scheduling.Endpoint, 0, len(eps)), eps[:i]...)
		}
	}
	if !dropped {
		return eps
	}
	return kept
}
